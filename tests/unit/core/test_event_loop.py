"""``[worker] event_loop``: which loop the worker's commands run on, and a clear error when uvloop is asked
for by name and missing."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from trace_scorer.config import ConfigError
from trace_scorer.config.worker import WorkerSettings
from trace_scorer.worker import event_loop


async def running_loop() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


@pytest.mark.parametrize("choice", ["auto", "uvloop"])
def test_uvloop_runs_the_commands_where_it_is_installed(choice: event_loop.EventLoop) -> None:
    assert event_loop.run(running_loop(), choice) is uvloop.Loop


def test_asyncio_names_the_standard_librarys_loop() -> None:
    ran_on = event_loop.run(running_loop(), "asyncio")
    assert issubclass(ran_on, asyncio.BaseEventLoop) and not issubclass(ran_on, uvloop.Loop)


def test_without_uvloop_auto_falls_back_and_uvloop_by_name_fails_naming_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what an import finds where it is not installed
    assert event_loop.loop_factory("auto") is None
    with pytest.raises(ConfigError, match=r"worker\.event_loop: 'uvloop' is not installed"):
        event_loop.loop_factory("uvloop")
    main = running_loop()
    with pytest.raises(ConfigError, match=r"worker\.event_loop"):
        event_loop.run(main, "uvloop")
    assert main.cr_frame is None  # closed, not left to warn that it was never awaited


def test_the_default_is_auto_and_an_unknown_loop_is_refused() -> None:
    assert WorkerSettings().event_loop == "auto"
    with pytest.raises(ValueError, match="event_loop"):
        WorkerSettings.model_validate({"event_loop": "trio"})

"""Fixtures used in more than one folder, registered for the whole tree by ``pytest_plugins`` in
``tests/conftest.py``: the in-process Langfuse stand-in (v4, v3, or any version), its fake clock,
recorded sleeps, the working directory of a CLI test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import respx
import structlog

from tests.support.clocks import FakeClock, SleepRecorder
from tests.support.langfuse_client import PUBLIC, SECRET
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse


@pytest.fixture(autouse=True)
def _logging_as_found() -> Iterator[None]:
    """Every test: structlog as it was found afterwards. A command run in-process (``cli.main``) configures
    structlog for the process, its level filtering INFO out, and a later test capturing the worker's INFO
    events (``structlog.testing.capture_logs``) then waited for events that were never shown to it."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def make_langfuse(clock: FakeClock) -> Iterator[MakeLangfuse]:
    """``make_langfuse(version="4.60.0", **LangfuseOptions)``: the in-process stand-in (one a test); no
    contract violation or unserved request allowed."""
    made: list[InProcessLangfuse] = []
    with respx.mock(assert_all_called=False) as router:

        def make(version: str = "4.60.0", **options: Any) -> InProcessLangfuse:
            assert not made, "one Langfuse a test"
            made.append(InProcessLangfuse(router, clock, version, **options))
            return made[0]

        yield make
    problems = [problem for server in made for problem in server.problems()]
    assert not problems, "contract violations or requests the stand-in does not serve:\n" + "\n".join(problems)


@pytest.fixture
def v4(make_langfuse: MakeLangfuse) -> InProcessLangfuse:
    """Langfuse 4.60 (v4 reads, score lists)."""
    return make_langfuse("4.60.0")


@pytest.fixture
def v3(make_langfuse: MakeLangfuse) -> InProcessLangfuse:
    """Langfuse 3.120 (legacy reads, score ingestion events)."""
    return make_langfuse("3.120.0")


@pytest.fixture
def cli_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of a CLI test: ``settings.toml`` (:data:`tests.support.worker.CLI_SETTINGS`),
    the in-process Langfuse's keys in the environment and no other Langfuse address."""
    from tests.support.worker import CLI_SETTINGS  # the worker's modules: loaded by the tests that need them

    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(CLI_SETTINGS)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()

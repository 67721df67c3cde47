"""Worker tests: the real sources, batch scorer and state against the in-process Langfuse stand-in
(``v4``, ``v3``, ``make_langfuse`` and ``clock`` come from :mod:`tests.support.fixtures`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.clocks import FakeClock, SleepRecorder
from tests.support.worker import FLAKY, GATES, Flaky, Harness, MakeHarness, settings_for, traces_target
from trace_scorer.config.judge import ProviderSettings
from trace_scorer.judge import build_judge
from trace_scorer.judge import chat as judge_chat
from trace_scorer.metrics.registry import MetricRegistry, default_registry
from trace_scorer.providers import client as provider_client
from trace_scorer.scoring import resources

#: An in-process chat endpoint: answers (or holds) each request.
ChatServer = Callable[[httpx.Request], Any]


@pytest.fixture(autouse=True)
def _registry_with_flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    registry: MetricRegistry = default_registry().with_classes(Flaky)
    monkeypatch.setattr("trace_scorer.scoring.plan.default_registry", lambda: registry)
    FLAKY.clear()
    GATES.clear()
    yield
    FLAKY.clear()
    GATES.clear()


@pytest.fixture
async def harness(tmp_path: Path, clock: FakeClock) -> AsyncIterator[MakeHarness]:
    made: list[Harness] = []

    async def make(*targets: dict[str, Any], **sections: Any) -> Harness:
        h = Harness(settings_for(tmp_path, *(targets or (traces_target(),)), **sections), clock)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.stack.aclose()


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch, sleeps: SleepRecorder) -> Callable[[ChatServer], None]:
    """``chat_server(handler)``: the judge's provider answers through ``handler``; its waits are recorded."""

    def serve(handler: ChatServer) -> None:
        def open_client(settings: ProviderSettings, api_key: str, http: httpx.AsyncClient | None = None) -> Any:
            mocked = httpx.AsyncClient(transport=httpx.MockTransport(handler))
            return provider_client.open_client(settings, api_key, mocked)

        monkeypatch.setattr(judge_chat, "open_client", open_client)
        monkeypatch.setattr(resources, "build_judge", functools.partial(build_judge, sleep=sleeps, clock=sleeps.clock))

    return serve

"""Worker tests: the real sources, batch scorer and state against the in-process Langfuse stand-in
(``v4``, ``v3``, ``make_langfuse`` and ``clock`` come from :mod:`tests.support.fixtures`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clocks import FakeClock
from tests.support.worker import FLAKY, GATES, Flaky, Harness, MakeHarness, settings_for, traces_target
from trace_scorer.metrics.registry import MetricRegistry, default_registry


@pytest.fixture(autouse=True)
def _registry_with_flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    registry: MetricRegistry = default_registry().with_classes(Flaky)
    monkeypatch.setattr("trace_scorer.plan.default_registry", lambda: registry)
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

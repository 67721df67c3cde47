"""The worker harness on the contract-checking fake Langfuse (``fake``, ``v4``, ``clock`` come from
:mod:`tests.support.fixtures`), for the worker's comparisons (``compare_to``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clocks import FakeClock
from tests.support.worker import Harness, MakeHarness, settings_for


@pytest.fixture
async def harness(tmp_path: Path, clock: FakeClock) -> AsyncIterator[MakeHarness]:
    made: list[Harness] = []

    async def make(*targets: dict[str, Any], **sections: Any) -> Harness:
        h = Harness(settings_for(tmp_path, *targets, **sections), clock)
        made.append(h)
        return h

    yield make
    for h in made:
        await h.stack.aclose()

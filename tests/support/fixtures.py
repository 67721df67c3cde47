"""Fixtures used in more than one folder, registered for the whole tree by ``pytest_plugins`` in
``tests/conftest.py``: the contract-checking fake Langfuse (v4 or v3), its fake clock, recorded sleeps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tests.support.clocks import FakeClock, SleepRecorder
from tests.support.langfuse_fake import FakeLangfuse, V3Server, V4Server


@pytest.fixture
def fake() -> Iterator[FakeLangfuse]:
    with respx.mock(assert_all_called=False) as router:
        server = FakeLangfuse(router)
        yield server
    assert not server.violations, "contract violations:\n" + "\n".join(server.violations)


@pytest.fixture
def v4(fake: FakeLangfuse) -> V4Server:
    return V4Server(fake)


@pytest.fixture
def v3(fake: FakeLangfuse) -> V3Server:
    return V3Server(fake)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()

"""Fixtures of the operations tests: a movable clock (overriding the Langfuse fake clock of
:mod:`tests.support.fixtures` in this folder), telemetry and health bound to it."""

from __future__ import annotations

import pytest

from tests.support.clocks import ManualClock
from trace_scorer.ops import Health, Telemetry


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def telemetry(clock: ManualClock) -> Telemetry:
    return Telemetry(clock=clock)


@pytest.fixture
def health(clock: ManualClock) -> Health:
    return Health(clock=clock, liveness_intervals=3, liveness_min=0)

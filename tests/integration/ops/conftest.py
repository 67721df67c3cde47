"""Fixtures of the operations tests: a movable clock, telemetry and health bound to it."""

from __future__ import annotations

import pytest

from trace_scorer.ops import Health, Telemetry


class FakeClock:
    """A clock the test moves by hand (monotonic or wall time: only differences matter)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def telemetry(clock: FakeClock) -> Telemetry:
    return Telemetry(clock=clock)


@pytest.fixture
def health(clock: FakeClock) -> Health:
    return Health(clock=clock, liveness_intervals=3, liveness_min=0)

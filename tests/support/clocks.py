"""Fake clocks: tests read the waits instead of waiting."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from tests.support.langfuse_factories import T0


class FakeClock:
    """Time that moves only when slept on: tests read the waits instead of waiting."""

    def __init__(self, wall: datetime | None = None) -> None:
        self.elapsed = 0.0
        self.wall = wall or T0 + timedelta(days=1)
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.elapsed

    def now(self) -> datetime:
        return self.wall + timedelta(seconds=self.elapsed)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds


class SleepRecorder:
    """Stands in for asyncio.sleep: records the waits and advances a virtual clock, returning at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._slept = 0.0

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._slept += seconds

    def clock(self) -> float:
        return time.monotonic() + self._slept

    def advance(self, seconds: float) -> None:
        """Time passing without a sleep of ours (e.g. a request the server takes long to answer)."""
        self._slept += seconds


class ManualClock:
    """A clock the test moves by hand (monotonic or wall time: only differences matter)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

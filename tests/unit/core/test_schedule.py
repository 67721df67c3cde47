"""Ticks on the monotonic clock and wall-clock steps (``worker/schedule.py``), with clocks the test moves."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import structlog

from tests.support.clocks import ManualClock
from trace_scorer.ops.telemetry import Telemetry
from trace_scorer.worker.schedule import CLOCK_STEP_TOLERANCE_SECONDS, ClockWatch, every

START = datetime(2026, 10, 1, tzinfo=UTC)


def steps(telemetry: Telemetry, direction: str) -> float | None:
    return telemetry.registry.get_sample_value("trace_scorer_clock_steps_total", {"direction": direction})


def test_a_step_either_way_is_logged_and_counted_and_drift_is_not() -> None:
    mono = ManualClock()
    offset = [timedelta(0)]
    telemetry = Telemetry(process_metrics=False)
    watch = ClockWatch(telemetry, lambda: START + timedelta(seconds=mono()) + offset[0], mono)
    with structlog.testing.capture_logs() as logs:
        assert watch.look() is None  # the first look has nothing to compare with
        mono.advance(60)
        offset[0] = timedelta(seconds=CLOCK_STEP_TOLERANCE_SECONDS)  # slewed or nearly: not a step
        assert watch.look() is None
        mono.advance(60)
        offset[0] += timedelta(hours=2)
        assert watch.look() == 7200.0
        mono.advance(60)
        offset[0] -= timedelta(hours=3)
        assert watch.look() == -10800.0
        mono.advance(60)
        assert watch.look() is None  # counted once: the next look compares with the stepped clock
    assert [(e["event"], e["direction"]) for e in logs] == [("clock_step", "forward"), ("clock_step", "backward")]
    assert (steps(telemetry, "forward"), steps(telemetry, "backward")) == (1, 1)


async def test_ticks_keep_their_interval_on_the_monotonic_clock_and_a_late_one_is_followed_at_once() -> None:
    mono = ManualClock(0.0)
    stop = asyncio.Event()
    started: list[float] = []
    durations = iter([1.0, 25.0, 1.0, 1.0])  # the second tick overruns the 10 s interval

    async def job() -> None:
        started.append(mono())
        mono.advance(next(durations))
        if len(started) == 4:
            stop.set()

    async def wait(seconds: float, stopping: asyncio.Event) -> None:
        mono.advance(seconds)

    await every(10, job, stop, monotonic=mono, wait=wait)
    assert started == [0.0, 10.0, 35.0, 45.0]

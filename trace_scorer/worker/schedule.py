"""When a target ticks: on the monotonic clock, and what a step of the wall clock looks like.

A target's ticks are a loop of our own: tick, then wait out the rest of the interval on the monotonic
clock (the event loop's), or until the worker is told to stop. APScheduler's interval trigger, used
before, computes every next run on the wall clock: a step back of an hour (NTP after a VM resume) left
the next run an hour away, so no tick came for the rest of the run. A loop is all the scheduling the
worker needs (one job per target, never two ticks of one target at once, a late tick followed by the next
one at once rather than by a burst), so no scheduler library is kept for it.
APScheduler (3.x) plans on the wall clock by design — its maintainer: "the scheduler relies on the
system clock being correct" (agronholm/apscheduler#351, #752); waking it on clock changes is an open
request (#794) — so keeping it would mean a monotonic watchdog rescheduling its jobs beside it: more code
than this loop, for nothing the loop lacks.

A step is noticed between ticks: the wall clock moved more than :data:`CLOCK_STEP_TOLERANCE_SECONDS`
more (or less) than the monotonic clock. It is logged (``clock_step``) and counted
(``trace_scorer_clock_steps_total``); what it changes for the windows is decided elsewhere: the traces'
windows follow the Langfuse server's own time when the local clock is off it (``ServerTime.present``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

import structlog

from trace_scorer.ops.telemetry import Telemetry

log = structlog.get_logger(__name__)

#: How far the wall clock may move apart from the monotonic clock between two ticks before it counts as a
#: step. NTP slews a clock by at most 0.5 ms a second (0.03 s over a minute's interval); a step is seconds
#: to hours.
CLOCK_STEP_TOLERANCE_SECONDS = 5.0

#: ``wait(seconds, stop)``: return after ``seconds`` on the monotonic clock, or as soon as ``stop`` is set
#: (tests inject one that moves their own monotonic clock and returns at once).
Wait = Callable[[float, asyncio.Event], Awaitable[None]]


async def wait_or_stop(seconds: float, stop: asyncio.Event) -> None:
    """``seconds`` on the event loop's (monotonic) clock, cut short by ``stop``."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), max(seconds, 0.0))


class ClockWatch:
    """Notices steps of the wall clock ``wall`` against ``monotonic`` between two looks."""

    def __init__(
        self, telemetry: Telemetry, wall: Callable[[], datetime], monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._telemetry = telemetry
        self._wall = wall
        self._monotonic = monotonic
        self._last: tuple[datetime, float] | None = None

    def look(self) -> float | None:
        """The step since the last look in seconds (negative: back), logged and counted; None: no step."""
        wall, mono = self._wall(), self._monotonic()
        last, self._last = self._last, (wall, mono)
        if last is None:
            return None
        step = (wall - last[0]).total_seconds() - (mono - last[1])
        if abs(step) <= CLOCK_STEP_TOLERANCE_SECONDS:
            return None
        log.warning(
            "clock_step",
            seconds=round(step, 3),
            direction="forward" if step > 0 else "backward",
            wall=wall.isoformat(),
            action="ticks keep to the monotonic clock; windows follow Langfuse's time while the clocks disagree",
        )
        self._telemetry.clock_step(step)
        return step


async def every(
    interval: float,
    job: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    wait: Wait = wait_or_stop,
) -> None:
    """Run ``job`` now and then every ``interval`` seconds of ``monotonic`` until ``stop`` is set. A job
    that overran its interval is followed by the next one at once (once: missed runs are not caught up)."""
    due = monotonic()
    while not stop.is_set():
        await job()
        due = max(due + interval, monotonic())
        if not stop.is_set():
            await wait(due - monotonic(), stop)

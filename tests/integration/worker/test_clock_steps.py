"""Issue #22, item 1: a step of the worker's wall clock loses no trace and stops no tick.

The stand-in's fake clock is the true time (the server dates its answers with it); the worker's wall
clock is that plus an offset the test steps, as NTP does after a VM resume. Nothing sleeps: the ticks'
monotonic clock is the fake clock's, moved by the injected wait.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
import structlog

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, traces_target
from trace_scorer.worker.service import Worker

LAG = timedelta(minutes=2)
AHEAD = timedelta(hours=2)


def scored_traces(v4: InProcessLangfuse) -> set[str]:
    return {s["traceId"] for s in v4.scores.values()}


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
async def test_a_forward_step_stores_no_watermark_ahead_of_langfuse_and_loses_no_trace(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, restart: bool
) -> None:
    """The issue's case: the clock 2 h ahead for 25 s, a tick every 5 s, then 20 traces arrive."""
    v4.add_rows(*agent_trace("before", clock.now() - timedelta(minutes=30)))
    h = await harness(traces_target(interval=5))
    context = await h.open()
    await h.tick(context)
    assert scored_traces(v4) == {"before"}

    for _ in range(5):
        clock.elapsed += 5
        await h.tick(context, now=clock.now() + AHEAD)
        watermark = context.state.watermark("agent")
        # Never past what the server showed: its own time (the Date of its answers) less the lag.
        assert watermark is not None and watermark <= clock.now() - LAG, (watermark, clock.now())

    arrived = [f"after-{n}" for n in range(20)]  # after the clock is right again
    for n, trace_id in enumerate(arrived):
        v4.add_rows(*agent_trace(trace_id, clock.now() + timedelta(seconds=n)))
    if restart:
        context.state.close()
        context = await h.open()
    clock.elapsed += 10 * 60  # every one ended, past the quiet period and the lag
    report = await h.tick(context)

    missing = set(arrived) - scored_traces(v4)
    assert not missing, f"{len(arrived) - len(missing)} of {len(arrived)} traces scored"
    assert report.scored == 20
    assert len(v4.scores) == 21 * 4  # once each (4 scores a trace)


async def test_a_watermark_stored_ahead_by_a_wrong_clock_is_read_again_from_lookback(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """A state written by a worker whose clock was ahead (or by an earlier release) holds a watermark in
    the server's future: the traces since are read again from ``lookback``, not skipped until then."""
    h = await harness(traces_target(lookback="1h"))
    context = await h.open()
    context.state.set_watermark("agent", clock.now() + AHEAD)
    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=20)))
    with structlog.testing.capture_logs() as logs:
        report = await h.tick(context)

    assert report.scored == 1 and scored_traces(v4) == {"t1"}
    assert context.state.watermark("agent") == clock.now() - LAG
    assert [e for e in logs if e["event"] == "watermark_ahead_of_clock"]


async def test_a_backward_step_keeps_the_ticks_coming_and_is_counted(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """The clock goes back an hour two minutes into the run: a tick still comes every interval of the
    monotonic clock, the traces that arrive after are scored, the step is logged and counted."""
    h = await harness(traces_target(interval=60))
    context = await h.open()
    offset = [timedelta(0)]

    def wall() -> datetime:
        return clock.now() + offset[0]

    stop = asyncio.Event()
    waits: list[float] = []

    async def wait(seconds: float, stopping: asyncio.Event) -> None:
        """The monotonic clock moves by ``seconds`` at once; the test's events happen on the way."""
        waits.append(seconds)
        clock.elapsed += seconds
        if clock.elapsed >= 120 and not offset[0]:
            offset[0] = -timedelta(hours=1)
        if clock.elapsed == 180:
            for n in range(5):
                v4.add_rows(*agent_trace(f"late-{n}", clock.now() + timedelta(seconds=n)))
        if clock.elapsed >= 20 * 60:
            stop.set()

    worker = Worker(context, clock=wall, stop=stop, monotonic=clock.monotonic, wait=wait)
    with structlog.testing.capture_logs() as logs:
        await worker.run()

    registry = context.ops.telemetry.registry
    ticks = registry.get_sample_value("trace_scorer_ticks_total", {"target": "agent", "outcome": "ok"})
    assert ticks == 20  # minutes 0 … 19
    assert all(w == pytest.approx(60) for w in waits)
    assert scored_traces(v4) == {f"late-{n}" for n in range(5)}
    steps = [e for e in logs if e["event"] == "clock_step"]
    assert [(e["direction"], e["seconds"]) for e in steps] == [("backward", -3600.0)]
    assert registry.get_sample_value("trace_scorer_clock_steps_total", {"direction": "backward"}) == 1
    assert registry.get_sample_value("trace_scorer_clock_steps_total", {"direction": "forward"}) is None
    watermark = context.state.watermark("agent")
    assert watermark is not None and watermark <= clock.now() - LAG

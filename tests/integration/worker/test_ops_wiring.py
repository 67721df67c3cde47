"""What the worker reports to its operations endpoints, and stopping during start-up.

Defects found by the process tests (tests/ops/test_worker_process.py), each pinned here:
- a tick that works through a backlog for longer than the liveness limit must report progress, or
  /healthz calls a busy worker stalled and the kubelet restarts it;
- every Langfuse request's duration reaches ``trace_scorer_langfuse_request_duration_seconds``;
- SIGTERM while start-up still retries an unreachable Langfuse stops it at once (exit 0 in the grace
  period), rather than after the retries run out;
- on SIGTERM the running tick finishes the batch in hand within ``shutdown_grace`` (APScheduler's
  ``shutdown()`` cancelled it at once) and is cancelled only when it overruns;
- ``trace_scorer_traces_skipped_total`` counts every reason a tick reports, not only "no observations".
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, traces_target
from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.ops import Health, Ops
from trace_scorer.worker.service import Worker, open_context, unless_stopped
from trace_scorer.worker.tick import TickReport


async def test_a_long_tick_reports_progress_to_liveness(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(minutes=30)
    for index in range(3):
        v4.add_rows(*agent_trace(f"t{index}", start + timedelta(seconds=index)))
    h = await harness(traces_target(interval=1))
    moment = [0.0]
    health = Health(clock=lambda: moment[0], liveness_intervals=2, liveness_min=0)
    ops = Ops.from_settings(h.settings.http, health=health)
    client = LangfuseClient(h.settings.langfuse, clock=clock)
    h.stack.push_async_callback(client.aclose)
    context = await open_context(h.settings, h.stack, ops=ops, client=client)
    health.watch("agent", 1.0)
    moment[0] = 10.0  # the tick began 10 s ago: beyond 2 intervals
    assert not health.liveness().ok

    report = await h.tick(context)

    assert report.scored == 3
    assert health.liveness().ok, health.liveness().reason  # listing, fetching and scoring count as activity


async def test_langfuse_request_durations_are_exported(harness: MakeHarness, v4: InProcessLangfuse) -> None:
    h = await harness()
    context = await h.open()
    registry = context.ops.telemetry.registry
    labels = {"endpoint": "GET /api/public/health"}
    assert registry.get_sample_value("trace_scorer_langfuse_requests_total", {**labels, "status": "200"}) == 1
    assert registry.get_sample_value("trace_scorer_langfuse_request_duration_seconds_count", labels) == 1
    assert (registry.get_sample_value("trace_scorer_langfuse_request_duration_seconds_sum", labels) or 0) >= 0


async def test_stop_during_start_up_cancels_it() -> None:
    cancelled = asyncio.Event()

    async def connecting_forever() -> str:
        try:
            await asyncio.sleep(3600)  # Langfuse unreachable, retried for a long time
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "connected"

    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, stop.set)
    assert await asyncio.wait_for(unless_stopped(connecting_forever(), stop), timeout=2) is None
    assert cancelled.is_set()


async def test_start_up_result_and_errors_pass_through() -> None:
    async def connected() -> str:
        return "context"

    async def refused() -> str:
        raise PermissionError("401")

    stop = asyncio.Event()
    assert await unless_stopped(connected(), stop) == "context"
    with pytest.raises(PermissionError):
        await unless_stopped(refused(), stop)
    assert len(asyncio.all_tasks()) == 1  # nothing left running but this test


class BatchInHand:
    """A source whose tick is busy with a batch when the worker is told to stop, and needs ``finish``
    seconds more to post it and save state."""

    def __init__(self, target: TargetSettings, finish: float) -> None:
        self.target = target
        self.finish = finish
        self.started = asyncio.Event()
        self.finished = False
        self.cancelled = False

    async def tick(self, now: datetime, stop: asyncio.Event) -> TickReport:
        self.started.set()
        try:
            await stop.wait()
            await asyncio.sleep(self.finish)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return TickReport(self.target.name)


@pytest.mark.parametrize(("finish", "finished"), [(0.2, True), (5.0, False)])
async def test_stop_lets_the_running_tick_finish_within_the_grace_period(
    harness: MakeHarness, v4: InProcessLangfuse, finish: float, finished: bool
) -> None:
    h = await harness(traces_target(interval=60), worker={"shutdown_grace": 0.5})
    context = await h.open()
    source = BatchInHand(context.sources["agent"].target, finish)
    context.sources = {"agent": source}
    worker = Worker(context)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(source.started.wait(), timeout=2)

    worker.stop.set()
    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(running, timeout=3)
    took = asyncio.get_running_loop().time() - started

    assert source.finished is finished  # the batch in hand is finished, not cancelled at once
    assert source.cancelled is not finished  # … unless it overruns the grace period
    assert took < 0.5 + 0.3 if not finished else finish <= took < 0.5


async def test_skipped_traces_are_exported_by_reason(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(minutes=30)
    # Ended 1 minute ago, inside the quiet period: not finished yet (it holds the watermark).
    v4.add_rows(*agent_trace("recent", clock.now() - timedelta(minutes=3), duration=120))
    for index in range(2):
        v4.add_rows(*agent_trace(f"t{index}", start + timedelta(seconds=index)))
    h = await harness()
    context = await h.open()
    worker = Worker(context, clock=clock.now)
    source = context.sources["agent"]
    registry = context.ops.telemetry.registry

    def skipped(reason: str) -> float:
        labels = {"target": "agent", "reason": reason}
        return registry.get_sample_value("trace_scorer_traces_skipped_total", labels) or 0

    await worker.tick(source)
    assert skipped("not_finished") == 1
    # The same window again (as after a lost watermark): the two scored traces are not scored twice.
    context.state.set_watermark("agent", start - timedelta(minutes=15))
    await worker.tick(source)
    assert skipped("already_scored") == 2
    assert skipped("not_finished") == 2


async def test_a_request_the_server_refuses_whole_stops_the_target_and_settles_nothing(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """A 4.16-like server that takes no score list: every list is a 400 ("expected object, received
    array"). Nothing may be recorded as scored (a later fix must post them), the target stops, and
    /readyz says why."""
    from tests.support.langfuse_factories import Reply

    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=30)))
    refused = Reply(400, {"message": "Invalid request data", "error": [{"message": "Expected object, received array"}]})
    v4.on("POST", "/api/public/scores", refused)
    h = await harness()
    context = await h.open()
    assert str(context.info.score_posting) == "scores-batch"
    worker = Worker(context, clock=clock.now)
    source = context.sources["agent"]
    await worker.tick(source)
    assert context.state.scored_hashes("agent", ["t1"]) == {}
    assert context.state.watermark("agent") is None
    assert "agent" in worker.stopped
    probe = context.ops.health.readiness()
    assert not probe.ok and "target agent stopped" in probe.reason and "Expected object" in probe.reason
    requests = len(v4.calls_to("POST", "/api/public/scores"))
    await worker.tick(source)  # a stopped target does not try again
    assert len(v4.calls_to("POST", "/api/public/scores")) == requests

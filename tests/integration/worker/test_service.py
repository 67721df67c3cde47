"""The worker service: requests per 100 traces on v3, the scheduler, and stopping cleanly."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import structlog

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace
from trace_scorer.worker.service import Worker


async def test_requests_per_100_traces_on_v3(harness: MakeHarness, v3: InProcessLangfuse, clock: FakeClock) -> None:
    start = clock.now() - timedelta(minutes=30)
    for index in range(100):  # the expected calls in each trace's metadata
        v3.add_rows(*agent_trace(f"t{index:03d}", start + timedelta(seconds=index)))
    h = await harness()
    context = await h.open()
    startup = len(v3.calls)
    assert (await h.tick(context)).scored == 100
    calls = v3.calls[startup:]
    reads = sum(c.method == "GET" for c in calls)
    posts = sum(c.method == "POST" for c in calls)
    print(f"\nv3: {reads} reads and {posts} ingestion posts for 100 traces")
    # v3 has no bulk read of observations: one list page plus one /traces/{id} per trace.
    assert reads <= 102 and posts <= 2


async def test_scheduler_ticks_each_target_and_stops_cleanly(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    from tests.support.worker import traces_target

    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=30)))
    h = await harness(traces_target(interval=0.05))
    context = await h.open()
    worker = Worker(context, clock=clock.now)
    running = asyncio.create_task(worker.run())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if any(s["traceId"] == "t1" for s in v4.scores.values()):
            break
    worker.stop.set()
    await asyncio.wait_for(running, timeout=5)
    assert {s["traceId"] for s in v4.scores.values()} == {"t1"}
    assert context.state.watermark("agent") is not None
    assert context.ops.health.readiness().ok is False  # shutting down: no longer ready


async def test_stop_lets_the_running_tick_finish_its_batch(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while a batch is being scored: the batch is posted and recorded before the worker exits
    (APScheduler's shutdown cancels running coroutine jobs, so it must not come first)."""
    from tests.support.worker import traces_target

    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=30)))
    h = await harness(traces_target(interval=0.05))
    context = await h.open()
    scorer = context.sources["agent"].scorer  # type: ignore[attr-defined]
    original = scorer.run
    scoring = asyncio.Event()

    async def slow_run(*args: Any, **kwargs: Any) -> Any:
        scoring.set()
        await asyncio.sleep(0.3)
        return await original(*args, **kwargs)

    monkeypatch.setattr(scorer, "run", slow_run)
    worker = Worker(context, clock=clock.now)
    with structlog.testing.capture_logs() as logs:
        running = asyncio.create_task(worker.run())
        await asyncio.wait_for(scoring.wait(), timeout=5)
        worker.stop.set()  # what SIGTERM does
        await asyncio.wait_for(running, timeout=5)
    assert {s["traceId"] for s in v4.scores.values()} == {"t1"}
    assert context.state.scored_hashes("agent", ["t1"]) == {"t1": context.plans["agent"].config_hash}
    ticks = [e for e in logs if e["event"] == "tick"]
    assert ticks and ticks[-1]["ok"] and ticks[-1]["traces_scored"] == 1
    assert not [e for e in logs if e["event"] == "worker_stop_timeout"]

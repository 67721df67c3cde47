"""Issue #22 item 3: a slow judge no longer holds a batch's scores back. With a trickling judge (4 slots,
40 traces) a trace's scores are posted once they are complete and the stream of results stalls, while the
later traces are still being judged; before, a batch's scores went out only when a score request was
full (500 scores) or the batch was over. The judge's requests are held until the test lets them answer,
and the flush's wait is a deadline the test expires: nothing waits for time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.integration.worker.conftest import ChatServer
from tests.support.clocks import FakeClock, ManualClock
from tests.support.deadlines import ManualDeadlines
from tests.support.judge import completion, verdict
from tests.support.langfuse_inprocess import InProcessLangfuse, Reply
from tests.support.worker import GATES, MakeHarness, agent_trace, traces_target
from trace_scorer.worker.traces import TraceSource

TRACES, SLOTS = 40, 4
POLITE = {"metric": "aspect_critic", "name": "polite", "definition": "The final answer is polite."}
TARGET = traces_target(metrics=[{"metric": "tool_call_accuracy"}, {"metric": "rouge"}, POLITE])
PROVIDER = {"name": "p", "base_url": "https://llm.test/v1", "chat_models": ["a"], "max_concurrency": SLOTS}
#: Every trace's scores: three metrics and the target's KPI.
NAMES = {"tool_call_accuracy", "rouge", "polite", "quality"}


async def until(event: asyncio.Event) -> None:
    await asyncio.wait_for(event.wait(), timeout=60)  # a safety net: fails, never waits


class TricklingJudge:
    """Holds each request until :meth:`answer` lets the oldest held one through (or :meth:`open` all)."""

    def __init__(self) -> None:
        self.held: list[asyncio.Event] = []
        self.requests = 0
        self.arrived = asyncio.Event()
        self.opened = False

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if not self.opened:
            gate = asyncio.Event()
            self.held.append(gate)
            self.arrived.set()
            await gate.wait()
        return completion(verdict(1))

    async def until_held(self, count: int) -> None:
        while len(self.held) < count:
            self.arrived.clear()
            await until(self.arrived)

    def answer(self) -> None:
        self.held.pop(0).set()

    def open(self) -> None:
        self.opened = True
        for gate in self.held:
            gate.set()
        self.held.clear()


class FlushDeadlines(ManualDeadlines):
    """Manual deadlines that say when one is entered (the batch waits to see whether more results come)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()

    @asynccontextmanager
    async def __call__(self, seconds: float) -> AsyncIterator[None]:
        async with super().__call__(seconds):
            self.entered.set()
            yield


def by_trace(v4: InProcessLangfuse) -> dict[str, set[str]]:
    posted: dict[str, set[str]] = {}
    for score in v4.scores.values():
        posted.setdefault(score["traceId"], set()).add(score["name"])
    return posted


async def test_a_traces_scores_are_posted_while_later_traces_are_still_judged(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, chat_server: Callable[[ChatServer], None]
) -> None:
    judge = TricklingJudge()
    chat_server(judge)
    start = clock.now() - timedelta(minutes=50)
    for index in range(TRACES):
        # Answers that differ: the judge's cache would answer equal prompts once.
        answer = f"It is 18 °C in Tokyo with light rain (forecast {index})."
        v4.add_rows(*agent_trace(f"t{index:02}", start + timedelta(seconds=index), answer=answer))
    posted = asyncio.Event()

    async def scores(request: Any, params: dict[str, str]) -> Reply:
        reply = await v4.standin_answer(request)
        posted.set()
        return reply

    v4.on("POST", "/api/public/scores", scores)
    h = await harness(TARGET, providers=[PROVIDER], judge={"tracing": False})
    context = await h.open()
    source = context.sources["agent"]
    assert isinstance(source, TraceSource)
    flush = FlushDeadlines()
    source.scorer.deadline = flush

    tick = asyncio.create_task(h.tick(context))
    try:
        await judge.until_held(SLOTS)  # the judge's slots are full
        judge.answer()  # one trace is judged
        await until(flush.entered)  # its scores wait a moment for others to share a request
        assert not v4.score_posts
        flush.expire()  # none came: the stream stalls
        await until(posted)

        # That trace's scores are in Langfuse, the others are still being judged (or wait for a slot).
        ((done, names),) = by_trace(v4).items()
        assert names == NAMES
        assert context.state.scored_hashes("agent", [done]) == {done: source.scorer.plan.config_hash}
        assert not tick.done() and len(judge.held) == SLOTS and judge.requests == SLOTS + 1

        judge.open()
        report = await asyncio.wait_for(tick, timeout=60)  # a safety net: fails, never waits
    finally:
        tick.cancel()

    assert report.scored == TRACES
    assert by_trace(v4) == {f"t{index:02}": NAMES for index in range(TRACES)}
    # Results coming fast filled one request: one post for the stalled trace, one for the other 39.
    assert len(v4.score_posts) == 2
    assert not v4.problems()


async def test_results_that_trickle_without_stalling_are_posted_once_the_first_has_waited_long_enough(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """Each result comes within the stall delay of the last, so the stream never stalls: the complete
    traces go out once the first of them has waited ``flush_at_most`` (10 s), while a later trace is
    still being scored. The traces are held by the toy metric's gates; the chunk's age is a manual clock."""
    ids = [f"t{index}" for index in range(4)]
    for index, trace_id in enumerate(ids):
        v4.add_rows(*agent_trace(trace_id, clock.now() - timedelta(minutes=30) + timedelta(seconds=index)))
        GATES[trace_id] = asyncio.Event()
    posted = asyncio.Event()

    async def scores(request: Any, params: dict[str, str]) -> Reply:
        reply = await v4.standin_answer(request)
        posted.set()
        return reply

    v4.on("POST", "/api/public/scores", scores)
    h = await harness(traces_target())
    context = await h.open()
    source = context.sources["agent"]
    assert isinstance(source, TraceSource)
    flush, chunk_clock = FlushDeadlines(), ManualClock()
    source.scorer.deadline, source.scorer.clock = flush, chunk_clock

    async def complete(trace_id: str) -> None:
        flush.entered.clear()
        GATES[trace_id].set()
        await until(flush.entered)  # its result is in: the batch waits for more

    tick = asyncio.create_task(h.tick(context))
    try:
        await complete("t0")
        chunk_clock.advance(9.6)
        await complete("t1")  # 0.4 s of t0's 10 s left
        assert flush.started == [1.0, pytest.approx(0.4)] and not posted.is_set()
        chunk_clock.advance(0.5)
        GATES["t2"].set()  # t0 has waited 10.1 s: the chunk goes out at once, t3 still being scored
        await until(posted)
        assert set(by_trace(v4)) == {"t0", "t1", "t2"} and not tick.done()
        GATES["t3"].set()
        report = await asyncio.wait_for(tick, timeout=60)  # a safety net: fails, never waits
    finally:
        tick.cancel()
    assert report.scored == 4 and set(by_trace(v4)) == set(ids)
    assert len(v4.score_posts) == 2

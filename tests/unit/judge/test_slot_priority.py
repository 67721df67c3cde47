"""Issue #22 item 3: a provider's free slots go to the traces started first, and a retry keeps its turn.

With a first-come semaphore a request that failed gave its slot back, backed off and queued behind every
request asked meanwhile: with a slow or failing judge the retries of all of a batch's traces interleaved
and no trace finished until nearly all had (40 traces, 4 slots: none in 240 s). The waits are recorded,
not slept (``sleeps``); the server fails each call's first attempt (an injected 503)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncGenerator, Iterator

import httpx
import pytest
import respx

from tests.support.judge import JudgeFactory, booking_sample, completion, error, provider, verdict
from trace_scorer.config import TargetSettings
from trace_scorer.metrics.base import Resources, Score
from trace_scorer.providers.limits import PrioritySlots
from trace_scorer.sample import Message, Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan

TRACES, SLOTS = 40, 4


class FailingFirst:
    """A chat endpoint that answers 503 to the first attempt of every distinct request, then a verdict."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.served = 0
        #: (trace index, attempt) of each request, in the order they came.
        self.log: list[tuple[int, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.served += 1
        body = json.dumps(json.loads(request.content)["messages"], sort_keys=True)
        self.attempts[body] += 1
        self.log.append((int(body.split("flight number ")[1].split(" ")[0]), self.attempts[body]))
        return error(503, "busy") if self.attempts[body] == 1 else completion(verdict(1))


@pytest.fixture
def server() -> Iterator[FailingFirst]:
    failing = FailingFirst()
    with respx.mock(assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=failing)
        yield failing


def trace(index: int) -> Sample:
    sample = booking_sample(id=f"s{index}", trace_id=f"t{index}")
    sample.messages[0] = Message(role="user", content=f"I need to book flight number {index} to Paris")
    return sample


async def test_with_a_failing_judge_the_traces_started_first_finish_first(
    server: FailingFirst, make_judge: JudgeFactory
) -> None:
    """40 traces in flight, 4 slots, each call's first attempt refused: the first trace is done after a few
    requests (its retry goes before the later traces' first attempts), and the traces finish in about
    the order they started. Before: the first answer came only after every trace's first attempt."""
    judge = await make_judge(provider("p", "a", max_concurrency=SLOTS))
    target = TargetSettings.model_validate(
        {"name": "t", "metrics": [{"metric": "aspect_critic", "name": "polite", "definition": "It is polite"}]}
    )
    pipeline = Pipeline(build_plan(target, resources=Resources(judge=judge)))

    async def samples() -> AsyncGenerator[Sample, None]:
        for index in range(TRACES):
            yield trace(index)

    order: list[int] = []
    async for result in pipeline.score_stream(samples(), concurrency=TRACES):
        assert isinstance(result.outcomes["polite"], Score)
        order.append(int(result.sample.id[1:]))

    assert sorted(order) == list(range(TRACES))
    assert len(server.log) == 2 * TRACES
    answered = {index: place for place, (index, attempt) in enumerate(server.log) if attempt == 2}
    asked = {index: place for place, (index, attempt) in enumerate(server.log) if attempt == 1}
    # Which trace's first request reaches the provider first is the event loop's business (the pipeline
    # starts them together); what the slots decide is what happens after: a refused request's retry goes
    # before the first requests of traces that asked later.
    askers = sorted(asked, key=asked.__getitem__)
    assert answered[askers[0]] < 2 * SLOTS  # before: request 41, after every trace's first attempt
    # No trace waits for the traces that asked two slots' worth after it.
    late = [
        (trace, answered[trace], askers[k + 2 * SLOTS])
        for k, trace in enumerate(askers[: TRACES - 2 * SLOTS])
        if answered[trace] >= asked[askers[k + 2 * SLOTS]]
    ]
    assert not late, (late, server.log)
    # Each trace finishes within a few places of where it asked (a slot's worth of overtaking at most).
    assert max(abs(place - askers.index(trace)) for place, trace in enumerate(order)) <= SLOTS, (order, askers)


async def test_a_freed_slot_goes_to_the_smallest_priority_waiting() -> None:
    slots = PrioritySlots(1)
    await slots.acquire(0)
    granted: list[int] = []

    async def wait(priority: int) -> None:
        await slots.acquire(priority)
        granted.append(priority)

    waiters = [asyncio.create_task(wait(p)) for p in (5, 3, 9, 1)]
    cancelled = asyncio.create_task(wait(0))
    await asyncio.sleep(0)  # every waiter queued (one turn of the loop, not a wait for time)
    cancelled.cancel()
    for _ in waiters:
        slots.release()
        await asyncio.sleep(0)
    await asyncio.gather(*waiters)
    assert granted == [1, 3, 5, 9]

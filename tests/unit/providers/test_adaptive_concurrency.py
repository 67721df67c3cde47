"""``adaptive_concurrency``: the bound on requests in flight follows latency (providers/limits.py
AdaptiveBound) — a server that serves one request at a time brings it down to 1, one that serves them all
at once keeps the maximum, and never are more requests in flight than the bound allows."""

from __future__ import annotations

import asyncio

from trace_scorer.providers.limits import AdaptiveBound, ProviderLimits


def test_a_server_that_queues_brings_the_bound_down_to_one() -> None:
    bound = AdaptiveBound(8)
    for position in range(1, 9):  # a burst of 8 served one at a time: the n-th answer after n service times
        bound.observe(float(position))
    assert int(bound.limit) == 1


def test_a_server_that_serves_in_parallel_keeps_the_maximum() -> None:
    bound = AdaptiveBound(8)
    for latency in [1.0, 1.2, 0.9, 1.3, 1.1, 1.0, 1.4, 0.95] * 4:
        bound.observe(latency)
    assert bound.limit == 8


def test_the_bound_grows_back_by_probing_once_answers_are_fast_again() -> None:
    bound = AdaptiveBound(4, start=1)
    bound.observe(1.0)
    for _ in range(3):
        bound.observe(1.0)
    assert bound.limit == 2  # 4 × 1 answers near the baseline: one more in flight
    bound.observe(2.0)  # the second one waited a whole service time: it queues
    assert int(bound.limit) == 1


def test_a_timeout_halves_the_bound() -> None:
    bound = AdaptiveBound(8)
    bound.timed_out()
    assert bound.limit == 4


async def test_never_more_in_flight_than_the_bound() -> None:
    limits = ProviderLimits(8, adaptive=True)
    assert limits.adaptive is not None
    limits.adaptive.limit = 2
    release, two_in = asyncio.Event(), asyncio.Event()
    peak = 0

    async def request() -> None:
        nonlocal peak
        async with limits.slot():
            assert limits.adaptive is not None
            peak = max(peak, limits.adaptive.in_flight)
            if limits.adaptive.in_flight == 2:
                two_in.set()
            await release.wait()

    tasks = [asyncio.create_task(request()) for _ in range(6)]
    await two_in.wait()
    for _ in range(10):
        await asyncio.sleep(0)  # give the other four every chance to get in: they must not
    assert limits.adaptive.in_flight == 2
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2 and limits.adaptive.in_flight == 0

"""Per-provider limits: requests in flight, requests per minute, the pause after a 429."""

from __future__ import annotations

import asyncio
import time

from trace_scorer.providers.limits import ProviderLimits, rate_limiter


async def test_concurrency_is_bounded() -> None:
    limits = ProviderLimits(max_concurrency=3)
    in_flight = peak = 0

    async def request() -> None:
        nonlocal in_flight, peak
        async with limits.slot():
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1

    await asyncio.gather(*(request() for _ in range(12)))
    assert peak == 3


async def test_requests_per_minute_are_spread_out() -> None:
    limits = ProviderLimits(max_concurrency=100, requests_per_minute=600)  # 10 per second
    started = time.monotonic()

    async def request() -> None:
        async with limits.slot():
            pass

    await asyncio.gather(*(request() for _ in range(15)))
    # 10 go at once, the other 5 drip at 10/s: about half a second, not instantly
    assert 0.35 <= time.monotonic() - started < 2.0


def test_slow_rates_are_one_request_per_interval() -> None:
    limiter = rate_limiter(30)
    assert (limiter.max_rate, limiter.time_period) == (1, 2.0)
    limiter = rate_limiter(1200)
    assert (limiter.max_rate, limiter.time_period) == (20.0, 1.0)


async def test_pause_holds_new_requests() -> None:
    now = 100.0
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    limits = ProviderLimits(max_concurrency=4, sleep=sleep, clock=lambda: now)
    limits.pause(9)
    async with limits.slot():
        pass
    assert waits == [9.0]
    now = 105.0
    async with limits.slot():
        pass
    assert waits == [9.0, 4.0]
    now = 120.0
    async with limits.slot():
        pass
    assert waits == [9.0, 4.0]
    limits.pause(1)  # a shorter pause never shortens a longer one
    limits.pause(0.5)
    async with limits.slot():
        pass
    assert waits[-1] == 1.0

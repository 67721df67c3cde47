"""Per-provider traffic bounds: requests in flight, requests per minute, and a pause after a 429."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol

from aiolimiter import AsyncLimiter

from trace_scorer.retry import Sleep


def rate_limiter(requests_per_minute: float) -> AsyncLimiter:
    """A leaky bucket that smooths to per-second granularity (providers often enforce per second too).

    600/min becomes 10 per 1 s window, not a burst of 600; below 60/min, one request per 60/rpm seconds.
    """
    if requests_per_minute >= 60:
        return AsyncLimiter(requests_per_minute / 60.0, 1.0)
    return AsyncLimiter(1, 60.0 / requests_per_minute)


class RateGate(Protocol):
    """Anything that books one request's turn: aiolimiter's ``AsyncLimiter`` in one process, a budget
    shared by every replica (``trace_scorer.distributed.rates``) in a fleet."""

    async def acquire(self) -> None: ...


#: A provider's name and its requests per minute → the gate that books them.
GateFor = Callable[[str, float], RateGate]


class ProviderLimits:
    """Bounds one provider's traffic, over all its models and all metrics of the process."""

    def __init__(
        self,
        max_concurrency: int,
        requests_per_minute: float | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self.requests_per_minute = requests_per_minute
        self._limiter: RateGate | None = rate_limiter(requests_per_minute) if requests_per_minute else None
        self._sleep = sleep
        self._clock = clock
        self._resume_at = 0.0
        self.max_concurrency = max_concurrency

    def share_rate(self, provider: str, gate_for: GateFor) -> None:
        """Book requests per minute with ``gate_for(provider, rpm)`` (a budget shared by every replica)
        instead of this process's own; nothing changes for a provider without ``requests_per_minute``."""
        if self.requests_per_minute:
            self._limiter = gate_for(provider, self.requests_per_minute)

    def now(self) -> float:
        return self._clock()

    async def hold(self, seconds: float) -> None:
        """Keep the caller's slot ``seconds`` longer (a timed-out request the server may still be running).

        Under a second is not held: a request that short is no work worth waiting out."""
        if seconds >= 1.0:
            await self._sleep(seconds)

    def pause(self, seconds: float) -> None:
        """Hold new requests for ``seconds`` (the provider said Retry-After): don't hammer a throttled API."""
        self._resume_at = max(self._resume_at, self._clock() + seconds)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One request's turn: a concurrency slot first, then the pause and a rate token."""
        async with self._semaphore:
            delay = self._resume_at - self._clock()
            if delay > 0:
                await self._sleep(delay)
            if self._limiter is not None:
                await self._limiter.acquire()
            yield

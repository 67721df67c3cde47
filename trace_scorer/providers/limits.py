"""Per-provider traffic bounds: requests in flight, requests per minute, and a pause after a 429.

Free slots go to the oldest work first, not to whoever asked last: each request carries a priority, the
:data:`work_priority` of the work it serves (the pipeline gives each trace one as it starts: earlier
traces first) or, outside such work, the time it was first asked; a retry keeps it. With a first-come
semaphore a retry went to the back of the queue after its back-off, so with a slow judge the retries of
every trace of a batch interleaved and none finished (40 traces, 4 slots: none in 240 s); now a trace
started first finishes first, and each trace's time is bounded by its own calls, not the batch's.

With ``adaptive_concurrency`` the bound on requests in flight follows the server (:class:`AdaptiveBound`):
a local server that runs one request at a time queues the others silently (no 429), so their latency
grows with the number in flight; the bound shrinks until latency is back near the fastest seen.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Protocol

from aiolimiter import AsyncLimiter

from trace_scorer.runtime.retry import Sleep


def rate_limiter(requests_per_minute: float) -> AsyncLimiter:
    """A leaky bucket that smooths to per-second granularity (providers often enforce per second too).

    600/min becomes 10 per 1 s window, not a burst of 600; below 60/min, one request per 60/rpm seconds.
    """
    if requests_per_minute >= 60:
        return AsyncLimiter(requests_per_minute / 60.0, 1.0)
    return AsyncLimiter(1, 60.0 / requests_per_minute)


#: One order for all priorities: work started earlier gets a smaller number.
_ORDER = itertools.count()


def next_priority() -> int:
    """A priority after every one handed out before (smaller goes first)."""
    return next(_ORDER)


#: The priority of the work this task does (the pipeline sets one per trace); None: each request its own.
work_priority: ContextVar[int | None] = ContextVar("work_priority", default=None)


class PrioritySlots:
    """At most ``size`` holders; a freed slot goes to the waiter with the smallest priority (FIFO among
    equals). Written here because ``asyncio.Semaphore`` wakes waiters first come, first served, and
    neither asyncio nor aiolimiter has a priority semaphore."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrival = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrival), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, granted = heapq.heappop(self._waiters)
            if not granted.done():  # a cancelled waiter's future is done: skipped
                granted.set_result(None)
                return
        self._free += 1


class RateGate(Protocol):
    """Anything that books one request's turn: aiolimiter's ``AsyncLimiter`` in one process, a budget
    shared by every replica (``trace_scorer.distributed.rates``) in a fleet."""

    async def acquire(self) -> None: ...


#: A provider's name and its requests per minute → the gate that books them.
GateFor = Callable[[str, float], RateGate]


class AdaptiveBound:
    """Requests in flight, bounded by a limit that follows latency (AIMD, latency-driven).

    ``baseline`` is the fastest answer seen (a queueing server's first answer of a burst is served at
    once, so it is the service time). An answer taking ``tolerance`` × baseline or more means requests
    wait in the server's queue: the limit shrinks in proportion (limit × baseline ÷ latency, at least 1);
    a timeout halves it. Once 4 × ``limit`` answers in a row came back near the baseline, it grows by
    one (a probe), up to the configured maximum. Hand-written: the well-kept limiters (aiolimiter,
    asyncio's semaphore) have fixed bounds, and the adaptive ones (Netflix's concurrency-limits) are Java.
    """

    def __init__(self, maximum: int, *, start: int | None = None, tolerance: float = 2.0) -> None:
        self.maximum = maximum
        self.limit = float(start if start is not None else maximum)
        self.tolerance = tolerance
        self.baseline: float | None = None
        self.in_flight = 0
        self._good = 0
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < max(1, int(self.limit)))
            self.in_flight += 1

    async def release(self) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    def observe(self, seconds: float) -> None:
        """An answer came back after ``seconds``: move the limit."""
        if self.baseline is None or seconds < self.baseline:
            self.baseline = seconds
        if seconds < self.tolerance * max(self.baseline, 1e-3):
            self._good += 1
            if self._good >= 4 * int(self.limit) and self.limit < self.maximum:
                self.limit = min(float(self.maximum), int(self.limit) + 1.0)
                self._good = 0
            return
        self._good = 0
        self.limit = max(1.0, self.limit * self.baseline / seconds)

    def timed_out(self) -> None:
        self._good = 0
        self.limit = max(1.0, self.limit / 2)


class ProviderLimits:
    """Bounds one provider's traffic, over all its models and all metrics of the process."""

    def __init__(
        self,
        max_concurrency: int,
        requests_per_minute: float | None = None,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        adaptive: bool = False,
    ) -> None:
        self._slots = PrioritySlots(max_concurrency)
        #: The latency-driven bound (``adaptive_concurrency``), under ``max_concurrency``; None: fixed.
        self.adaptive = AdaptiveBound(max_concurrency) if adaptive else None
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
    async def slot(self, priority: int | None = None) -> AsyncIterator[None]:
        """One request's turn: a concurrency slot first (by ``priority``, smallest first; by default the
        current :data:`work_priority`, else now), then the adaptive bound, the pause and a rate token."""
        await self.enter(request_priority() if priority is None else priority)
        try:
            yield
        finally:
            await self.leave()

    async def enter(self, priority: int) -> None:
        """:meth:`slot`'s entry, for the per-call path (``send_retrying``), where a generator-based context
        manager cost ~1 % of the worker's CPU a judged trace; every ``enter`` is followed by one ``leave``."""
        await self._slots.acquire(priority)
        try:
            if self.adaptive is not None:
                await self.adaptive.acquire()
            try:
                delay = self._resume_at - self._clock()
                if delay > 0:
                    await self._sleep(delay)
                if self._limiter is not None:
                    await self._limiter.acquire()
            except BaseException:
                if self.adaptive is not None:
                    await self.adaptive.release()
                raise
        except BaseException:
            self._slots.release()
            raise

    async def leave(self) -> None:
        """:meth:`slot`'s exit: the adaptive bound's place and the concurrency slot given back."""
        try:
            if self.adaptive is not None:
                await self.adaptive.release()
        finally:
            self._slots.release()

    def timed_out(self) -> None:
        """A request timed out (the adaptive bound halves)."""
        if self.adaptive is not None:
            self.adaptive.timed_out()

    def answered(self, seconds: float) -> None:
        """A request was answered after ``seconds`` (the adaptive bound follows it)."""
        if self.adaptive is not None:
            self.adaptive.observe(seconds)


def request_priority() -> int:
    """A request's priority: its work's, else a new one (first asked, first served). Taken once per
    request, so its retries keep it."""
    priority = work_priority.get()
    return next_priority() if priority is None else priority

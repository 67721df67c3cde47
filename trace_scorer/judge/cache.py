"""The request cache: identical judge requests within one process get one answer, one bill.

What is needed is *in-flight coalescing* (two metrics asking the same question at the same moment share
one HTTP call) plus an LRU bound (:class:`~trace_scorer.providers.futures.FutureLRU`, which the
embeddings' text cache shares). Failures are never cached: the next asker tries again.

Not ``async-lru`` (2.4, whose ``alru_cache(key=…)`` does coalesce in-flight calls): it runs each call in a
task of its own and drops the oldest entry even while its call is on its way, and it does not tell a
caller whether its answer was shared. The judge needs the call to run in the asker's task (the metric
deadline of ``Judge.bounded`` cancels the asker, and with it the call, whose tracing span closes as
failed, and names the models still being asked), the bound to spare calls in flight, and "shared or not"
to bill a shared answer once.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Generic, TypeVar

from trace_scorer.data import jsonbytes
from trace_scorer.providers.futures import FutureLRU

T = TypeVar("T")


def request_key(**parts: Any) -> str:
    """A stable digest of everything that determines the answer (model, messages, schema, sampling…)."""
    return hashlib.sha256(jsonbytes.sorted_digest_input(parts)).hexdigest()


class RequestCache(Generic[T]):
    """Answers by request key, least-recently-used first out; ``max_entries=0`` turns it off."""

    def __init__(self, max_entries: int) -> None:
        self._futures: FutureLRU[str, T] = FutureLRU(max_entries)

    def __len__(self) -> int:
        return len(self._futures)

    @property
    def hits(self) -> int:
        return self._futures.hits

    @property
    def misses(self) -> int:
        return self._futures.misses

    def shared(self, key: str) -> asyncio.Future[T] | None:
        """The answer of an identical request, done or on its way (a hit: await it through
        ``asyncio.shield``, so a waiter being cancelled does not cancel it for the others), or None (a
        miss: make the call between :meth:`start` and :meth:`done` or :meth:`failed`)."""
        if self._futures.max_entries <= 0:
            self._futures.misses += 1
            return None
        return self._futures.known(key)

    def start(self, key: str) -> asyncio.Future[T] | None:
        """The future the answer of the call about to be made is shared through (None: the cache is off)."""
        return self._futures.start(key) if self._futures.max_entries > 0 else None

    def done(self, key: str, future: asyncio.Future[T] | None, value: T) -> None:
        """The call of :meth:`start` answered ``value``: shared and kept (the oldest beyond the bound go)."""
        if future is not None:
            future.set_result(value)
            self._futures.evict()

    def failed(self, key: str, future: asyncio.Future[T] | None, exc: BaseException) -> None:
        """The call of :meth:`start` raised ``exc`` (or was cancelled): the waiters get it, nothing is kept."""
        if future is None:
            return
        self._futures.forget(key, future)
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody waited

"""The request cache: identical judge requests within one process get one answer, one bill.

Hand-written rather than cachetools/aiocache: what is needed is *in-flight coalescing* (two metrics
asking the same question at the same moment share one HTTP call) plus an LRU bound, and neither library
does the first for coroutines. Failures are never cached: the next asker tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def request_key(**parts: Any) -> str:
    """A stable digest of everything that determines the answer (model, messages, schema, sampling…)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class RequestCache(Generic[T]):
    """Answers by request key, least-recently-used first out; ``max_entries=0`` turns it off."""

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._entries: OrderedDict[str, asyncio.Future[T]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def get_or_call(self, key: str, call: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The answer for ``key`` and whether it came from the cache (or an identical call in flight)."""
        if self._max <= 0:
            self.misses += 1
            return await call(), False
        existing = self._entries.get(key)
        if existing is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            # shield: a waiter being cancelled must not cancel the shared call's future for the others.
            return await asyncio.shield(existing), True
        self.misses += 1
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._entries[key] = future
        try:
            value = await call()
        except BaseException as exc:
            self._entries.pop(key, None)
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # mark retrieved: no "never retrieved" warning when nobody waited
            raise
        future.set_result(value)
        self._evict()
        return value, False

    def _evict(self) -> None:
        while len(self._entries) > self._max:
            key, oldest = next(iter(self._entries.items()))
            if not oldest.done():  # never drop a call in flight; the bound is soft while calls run
                break
            del self._entries[key]

"""An LRU table of futures: answers by key, the ones still on their way shared, failures never kept.

Under both the judge's request cache (``judge/cache.py``: one future per identical request) and the
embedder's text cache (``embeddings/batching.py``: one future per text, resolved by a batch).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class FutureLRU(Generic[K, T]):
    """Futures by key, least recently used first out; a future still pending is never dropped (the bound
    is soft while calls run). ``hits`` counts asks served by a known future, done or on its way."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(max_entries, 0)
        self._entries: OrderedDict[K, asyncio.Future[T]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def known(self, key: K) -> asyncio.Future[T] | None:
        """The future of ``key`` (now the most recently used), or None — counted as a hit or a miss."""
        future = self._entries.get(key)
        if future is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return future

    def start(self, key: K) -> asyncio.Future[T]:
        """A new pending future for ``key``, kept until it fails or is evicted."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._entries[key] = future
        return future

    def forget(self, key: K, future: asyncio.Future[T]) -> None:
        """Drop ``key`` if ``future`` is still its entry (a failure is never kept)."""
        if self._entries.get(key) is future:
            del self._entries[key]

    def clear(self) -> None:
        """Drop every entry (the counts stay)."""
        self._entries.clear()

    def evict(self) -> None:
        """Drop the least recently used done futures beyond ``max_entries``."""
        excess = len(self._entries) - self.max_entries
        if excess <= 0:
            return
        for key in [k for k, f in self._entries.items() if f.done()][:excess]:
            del self._entries[key]

"""Datasets by name and dataset items by id, cached: many runs of one dataset share them (pass@k).

Both are read as plain JSON (not through the ``langfuse`` package's models): only the fields the worker
needs are read, and a field a server does not send is not a failure (2.x sends no ``mediaReferences``,
which the package's ``DatasetItem`` requires).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from trace_scorer.langfuse.errors import LangfuseNotFoundError, LangfuseResponseError
from trace_scorer.langfuse.http.clock import Clock
from trace_scorer.langfuse.http.endpoints import DATASET_GET, DATASET_ITEM_GET
from trace_scorer.langfuse.http.transport import Transport
from trace_scorer.langfuse.types import Dataset

#: How long a cached item is trusted: an edited expected output is seen within this time.
ITEM_TTL_SECONDS = 3600.0
#: Items kept per dataset; the oldest entries go first beyond it.
MAX_ITEMS_PER_DATASET = 20_000


class DatasetsByName:
    """``GET /api/public/v2/datasets/{name}`` once per name (every server generation has it, 2.x too)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._datasets: dict[str, Dataset] = {}

    async def get(self, name: str) -> Dataset:
        if name not in self._datasets:
            answer = await self._transport.plain(DATASET_GET, f"/api/public/v2/datasets/{quote(name, safe='')}")
            body = answer.body
            if not isinstance(body, Mapping) or not body.get("id"):
                raise LangfuseResponseError(endpoint=DATASET_GET.label, detail="no dataset id in the answer")
            self._datasets[name] = Dataset(id=str(body["id"]), name=str(body.get("name") or name))
        return self._datasets[name]


class DatasetItemCache:
    """``GET /api/public/dataset-items/{id}`` once per item and TTL; a missing item is cached as None."""

    def __init__(self, transport: Transport, clock: Clock) -> None:
        self._transport = transport
        self._clock = clock
        self._by_dataset: dict[str, dict[str, tuple[float, Mapping[str, Any] | None]]] = {}

    async def get(self, dataset_id: str | None, item_id: str) -> Mapping[str, Any] | None:
        """The item as Langfuse returns it (``input``, ``expectedOutput``, ``metadata``, …), or None."""
        cache = self._by_dataset.setdefault(dataset_id or "", {})
        now = self._clock.monotonic()
        hit = cache.get(item_id)
        if hit is not None and now - hit[0] < ITEM_TTL_SECONDS:
            return hit[1]
        try:
            answer = await self._transport.plain(
                DATASET_ITEM_GET, f"/api/public/dataset-items/{quote(item_id, safe='')}"
            )
            if not isinstance(answer.body, Mapping):
                raise LangfuseResponseError(endpoint=DATASET_ITEM_GET.label, detail="the answer is not a JSON object")
            item: Mapping[str, Any] | None = answer.body
        except LangfuseNotFoundError:
            item = None
        if len(cache) >= MAX_ITEMS_PER_DATASET:
            del cache[next(iter(cache))]
        cache[item_id] = (now, item)
        return item

    def clear(self, dataset_id: str | None = None) -> None:
        if dataset_id is None:
            self._by_dataset.clear()
        else:
            self._by_dataset.pop(dataset_id, None)

"""Reads from a self-hosted Langfuse v3 server: the legacy traces and dataset-run endpoints.

The ``langfuse`` 5.x package no longer has these endpoints, so they are plain httpx calls (same auth,
same retries). Everything comes out as the v4 reader's objects: traces become v4-shaped rows (a root
row ``t-<traceId>`` as Langfuse v4 makes of a legacy trace, then the observations), dataset runs become
:class:`Experiment`\\ s and their items :class:`ExperimentItem`\\ s joined to the dataset items.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from langfuse.api import AsyncLangfuseAPI

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse.dataset_items import DatasetItemCache, DatasetsByName
from trace_scorer.langfuse.endpoints import (
    DATASET_RUN_ITEMS,
    DATASET_RUNS,
    TRACE_GET,
    TRACES_LIST,
    Endpoint,
)
from trace_scorer.langfuse.errors import LangfuseNotFoundError, LangfuseResponseError
from trace_scorer.langfuse.filters import root_matches, v3_traces_query
from trace_scorer.langfuse.ids import parse_timestamp
from trace_scorer.langfuse.rows import sort_rows, trace_root_from_row, v3_trace_root_row, v3_trace_rows
from trace_scorer.langfuse.transport import QueryValue, Transport
from trace_scorer.langfuse.types import (
    Dataset,
    Experiment,
    ExperimentItem,
    TimeWindow,
    TraceFilter,
    TraceRoot,
    TraceRows,
)

#: Page size of the legacy list endpoints (Langfuse documents no maximum; 100 keeps pages light).
LEGACY_MAX_LIMIT = 100
#: ``metrics`` gives ``latency``, from which the root's end time is derived.
TRACE_LIST_FIELDS = "core,io,metrics"
TRACE_GET_FIELDS = "core,io,observations,metrics"


class V3Reader:
    #: Legacy ingestion shows a trace from its first event on (its end time comes later).
    rows_appear_at_end = False

    def __init__(
        self,
        *,
        transport: Transport,
        api: AsyncLangfuseAPI,
        settings: LangfuseSettings,
        items: DatasetItemCache,
    ) -> None:
        self._transport = transport
        self._api = api
        self._limit = min(settings.page_size, LEGACY_MAX_LIMIT)
        self._items = items
        self._datasets = DatasetsByName(transport, api)

    async def _pages(
        self, endpoint: Endpoint, path: str, params: Mapping[str, QueryValue]
    ) -> AsyncIterator[list[Mapping[str, Any]]]:
        """Page through a page/limit endpoint until ``meta.totalPages`` (or an empty page)."""
        page = 1
        while True:
            answer = await self._transport.legacy(
                endpoint, path, params={**params, "page": page, "limit": self._limit}
            )
            body = answer.body
            if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
                raise LangfuseResponseError(endpoint=endpoint.label, detail="no data list in the answer")
            data = body["data"]
            yield data
            total_pages = (body.get("meta") or {}).get("totalPages")
            if not data or not isinstance(total_pages, int) or page >= total_pages:
                return
            page += 1

    # --- traces ------------------------------------------------------------------------------

    async def list_trace_roots(
        self, window: TimeWindow, trace_filter: TraceFilter
    ) -> AsyncIterator[TraceRoot]:
        """Traces with a timestamp in ``window`` that match the filter, oldest first, each once."""
        params: dict[str, QueryValue] = {
            **v3_traces_query(window, trace_filter),
            "orderBy": "timestamp.asc",
            "fields": TRACE_LIST_FIELDS,
        }
        seen: set[str] = set()
        async for page in self._pages(TRACES_LIST, TRACES_LIST.path, params):
            for trace in page:
                trace_id = str(trace["id"])
                if trace_id in seen:  # offset paging repeats a row when traces arrive meanwhile
                    continue
                seen.add(trace_id)
                root = trace_root_from_row(v3_trace_root_row(trace))
                if root_matches(root, trace_filter):  # older servers ignore some conditions
                    yield root

    async def fetch_trace(self, trace_id: str) -> TraceRows:
        """``/traces/{id}`` with its observations, as v4 rows; a missing trace has no rows."""
        try:
            answer = await self._transport.legacy(
                TRACE_GET,
                f"/api/public/traces/{quote(trace_id, safe='')}",
                params={"fields": TRACE_GET_FIELDS},
            )
        except LangfuseNotFoundError:
            return TraceRows(trace_id, [])
        return TraceRows(trace_id, sort_rows(v3_trace_rows(answer.body)))

    async def fetch_traces(self, roots: Sequence[TraceRoot]) -> AsyncIterator[TraceRows]:
        """One request per trace: the v3 list endpoint does not return observation bodies."""
        for trace_id in dict.fromkeys(r.trace_id for r in roots):
            yield await self.fetch_trace(trace_id)

    # --- datasets and runs -------------------------------------------------------------------

    async def get_dataset(self, name: str) -> Dataset:
        return await self._datasets.get(name)

    async def list_experiments(
        self, datasets: Sequence[Dataset], since: datetime, until: datetime | None = None
    ) -> AsyncIterator[Experiment]:
        """The datasets' runs updated since ``since`` (and created before ``until``).

        v3 reports no item activity per run: a run counts as active from its creation to its last
        update (``updatedAt``); item counts are unknown (None).
        """
        for dataset in {d.id: d for d in datasets}.values():
            path = f"/api/public/datasets/{quote(dataset.name, safe='')}/runs"
            async for page in self._pages(DATASET_RUNS, path, {}):
                for run in page:
                    created = parse_timestamp(str(run["createdAt"]))
                    updated = parse_timestamp(str(run["updatedAt"]))
                    if updated < since or (until is not None and created >= until):
                        continue
                    metadata = run.get("metadata")
                    yield Experiment(
                        id=str(run["id"]),
                        name=str(run["name"]),
                        dataset_id=str(run.get("datasetId") or dataset.id),
                        start_time=created,
                        end_time=updated,
                        item_count=None,
                        description=run.get("description"),
                        metadata=metadata if isinstance(metadata, dict) else {},
                    )

    async def list_experiment_items(
        self, experiment: Experiment, since: datetime
    ) -> AsyncIterator[ExperimentItem]:
        """The run's items created since ``since``, joined to their dataset items (cached)."""
        if experiment.dataset_id is None:
            raise ValueError(f"dataset run {experiment.id} has no dataset id")
        params: dict[str, QueryValue] = {"datasetId": experiment.dataset_id, "runName": experiment.name}
        seen: set[str] = set()
        async for page in self._pages(DATASET_RUN_ITEMS, DATASET_RUN_ITEMS.path, params):
            for run_item in page:
                created = parse_timestamp(str(run_item["createdAt"]))
                if created < since or run_item["id"] in seen:
                    continue
                seen.add(run_item["id"])
                item = await self._items.get(experiment.dataset_id, str(run_item["datasetItemId"]))
                yield ExperimentItem(
                    trace_id=str(run_item["traceId"]),
                    observation_id=run_item.get("observationId"),
                    experiment_id=str(run_item["datasetRunId"]),
                    experiment_name=str(run_item["datasetRunName"]),
                    dataset_item_id=str(run_item["datasetItemId"]),
                    dataset_id=experiment.dataset_id,
                    start_time=created,
                    environment=None,
                    input=item.get("input") if item is not None else None,
                    output=None,
                    expected_output=item.get("expectedOutput") if item is not None else None,
                    metadata={},
                    item_metadata=_mapping(item.get("metadata")) if item is not None else {},
                )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}

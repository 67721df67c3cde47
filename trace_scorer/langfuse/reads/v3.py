"""Reads from a self-hosted Langfuse v3 (or 2.x) server: the legacy traces, observations and dataset-run
endpoints.

The ``langfuse`` 5.x package no longer has these endpoints, so they are plain httpx calls (same auth,
same retries). Everything comes out as the v4 reader's objects: traces become v4-shaped rows (a root
row ``t-<traceId>`` as Langfuse v4 makes of a legacy trace, then the observations), dataset runs become
:class:`Experiment`\\ s and their items :class:`ExperimentItem`\\ s joined to the dataset items.

**Bulk reads of trace bodies.** ``GET /traces`` lists each trace with the ids of its observations; the
reader keeps them. A batch of listed traces is then read with ``GET /observations`` over the batch's
span (earliest trace start to latest trace end, no slack: 100 rows a page, offset paging, newest first)
by the shared window scan (:class:`TraceScanner`: grouped by trace, de-duplicated, memory-bounded, the
per-trace row cap), instead of one ``GET /traces/{id}`` per trace. Offset paging is not a snapshot
(``startTime`` ties reorder between pages, rows arrive meanwhile) and a trace's observations may start
before its timestamp or after its end: so a trace is handed on from the scan only when every
observation the listing named was found, and read on its own otherwise. The result is what the
per-trace read gives for the same data (``tests/integration/langfuse/test_reads_v3_bulk.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import structlog

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.data.times import parse_timestamp
from trace_scorer.extract.rows import Observation, dedupe_observations
from trace_scorer.langfuse.errors import LangfuseAnswerTooLarge, LangfuseNotFoundError, LangfuseResponseError
from trace_scorer.langfuse.http.endpoints import (
    DATASET_RUN,
    DATASET_RUN_ITEMS,
    DATASET_RUNS,
    OBSERVATIONS_V1,
    TRACE_GET,
    TRACES_LIST,
    Endpoint,
)
from trace_scorer.langfuse.http.transport import QueryValue, Transport
from trace_scorer.langfuse.reads.dataset_items import DatasetItemCache, DatasetsByName
from trace_scorer.langfuse.reads.filters import root_matches, v3_traces_query
from trace_scorer.langfuse.reads.rows import (
    row_start,
    trace_root_from_row,
    v3_observation_row,
    v3_trace_root_row,
    v3_trace_rows,
)
from trace_scorer.langfuse.reads.trace_scan import ANSWER_TOO_LARGE, IdReads, OversizedTrace, TraceScanner, over_cap
from trace_scorer.langfuse.server.capabilities import ServerCapabilities
from trace_scorer.langfuse.types import (
    Dataset,
    Experiment,
    ExperimentItem,
    KnownTraces,
    RootListing,
    Row,
    TimeWindow,
    TraceFilter,
    TraceRoot,
    TraceRows,
)
from trace_scorer.langfuse.writes.ids import format_timestamp

log = structlog.get_logger(__name__)

#: Page size of the legacy list endpoints: their ``limit`` is at most 100 (``publicApiPaginationZod``).
LEGACY_MAX_LIMIT = 100
#: ``metrics`` gives ``latency``, from which the root's end time is derived; ``observations`` the ids of
#: the trace's observations, by which a bulk read knows it found all of them.
TRACE_LIST_FIELDS = "core,io,observations,metrics"
TRACE_GET_FIELDS = "core,io,observations,metrics"
#: Listed traces whose observation ids are kept for the bulk read (the least recently listed go first;
#: a trace no longer kept is read on its own).
LISTED_TRACES_KEPT = 100_000
#: A server of unknown version (the default until the client knows better).
UNKNOWN_SERVER = ServerCapabilities(None)


class V3Reader:
    #: Legacy ingestion shows a trace from its first event on (its end time comes later).
    rows_appear_at_end = False
    #: Legacy reads ask for traces one at a time or by window, never by a list of ids.
    id_reads: IdReads | None = None
    #: A run's ``item_count`` is its total (not within a window): an unchanged count means no new item.
    item_counts_are_totals = True

    def __init__(
        self,
        *,
        transport: Transport,
        settings: LangfuseSettings,
        items: DatasetItemCache,
        capabilities: ServerCapabilities = UNKNOWN_SERVER,
    ) -> None:
        self.capabilities = capabilities
        self._transport = transport
        self._settings = settings
        self._limit = min(settings.page_size, LEGACY_MAX_LIMIT)
        self._items = items
        #: Observation ids of listed traces, by trace id (bounded: :data:`LISTED_TRACES_KEPT`).
        self._listed: OrderedDict[str, frozenset[str]] = OrderedDict()
        #: False once the server showed it ignores ``toStartTime`` (an old 2.x): trace bodies one by one.
        self._bulk_reads = True
        #: Traces of bulk reads that were read on their own after all. For tests and benches only.
        self.bulk_fallbacks = 0
        self._datasets = DatasetsByName(transport)
        #: Dataset names by id, as listed (2.x reads a run's items under its dataset's name).
        self._dataset_names: dict[str, str] = {}
        #: 2.x: the items that came with a run when it was counted, until they are read.
        self._run_items: dict[str, list[Mapping[str, Any]]] = {}

    async def _pages(
        self, endpoint: Endpoint, path: str, params: Mapping[str, QueryValue], *, distinct_rows: bool = False
    ) -> AsyncGenerator[list[Mapping[str, Any]], None]:
        """Page through a page/limit endpoint until ``meta.totalPages`` (or an empty page).

        ``distinct_rows``: a page with fewer distinct ids than the limit is the last too. (3.x pages
        ``/observations`` by observation but may answer each with its unmerged rows, and counts rows in
        ``totalItems``, so ``totalPages`` overshoots.)"""
        page = 1
        while True:
            answer = await self._transport.plain(endpoint, path, params={**params, "page": page, "limit": self._limit})
            body = answer.body
            if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
                raise LangfuseResponseError(endpoint=endpoint.label, detail="no data list in the answer")
            data = body["data"]
            yield data
            total_pages = (body.get("meta") or {}).get("totalPages")
            if not data or not isinstance(total_pages, int) or page >= total_pages:
                return
            if distinct_rows and len({row.get("id") for row in data}) < self._limit:
                return
            page += 1

    # --- traces ------------------------------------------------------------------------------

    async def list_trace_roots(self, window: TimeWindow, trace_filter: TraceFilter) -> AsyncGenerator[TraceRoot, None]:
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
                    self._remember(trace_id, trace.get("observations"))
                    yield root

    async def list_roots(
        self,
        window: TimeWindow,
        trace_filter: TraceFilter,
        *,
        max_traces: int = 0,
        known: KnownTraces | None = None,
        ended_since: datetime | None = None,
    ) -> RootListing:
        """:meth:`list_trace_roots` up to ``max_traces`` (0: no limit), without those ``known`` names.
        Traces come oldest first here: the listing stops at the first root past ``max_traces`` that starts
        later than the one before it (the next window starts there). ``ended_since`` is checked here, on
        our side (the legacy list has no end-time filter)."""
        roots: list[TraceRoot] = []
        async with aclosing(self.list_trace_roots(window, trace_filter)) as listed:
            async for root in listed:
                if ended_since is not None and (root.end_time is None or root.end_time < ended_since):
                    continue
                if max_traces and len(roots) >= max_traces and root.start_time > roots[-1].start_time:
                    return RootListing(roots, root.start_time)
                if known is None or root.trace_id not in known([root]):
                    roots.append(root)
        return RootListing(roots, window.end)

    def _remember(self, trace_id: str, observation_ids: Any) -> None:
        """Keep the observation ids a listing gave for a trace (the bulk read checks its finds by them)."""
        if not isinstance(observation_ids, list) or not all(isinstance(i, str) for i in observation_ids):
            return
        self._listed[trace_id] = frozenset(observation_ids)
        self._listed.move_to_end(trace_id)
        while len(self._listed) > LISTED_TRACES_KEPT:
            self._listed.popitem(last=False)

    async def fetch_trace(self, trace_id: str) -> TraceRows:
        """``/traces/{id}`` with its observations, as v4 rows; a missing trace has no rows. A trace with
        more observations than ``max_rows_per_trace`` is an :class:`OversizedTrace` (it came whole in one
        answer, but is not handed on)."""
        try:
            answer = await self._transport.plain(
                TRACE_GET,
                f"/api/public/traces/{quote(trace_id, safe='')}",
                params={"fields": TRACE_GET_FIELDS},
            )
        except LangfuseNotFoundError:
            return TraceRows(trace_id, [])
        except LangfuseAnswerTooLarge as error:
            return OversizedTrace(trace_id, [], limit=error.limit, reason=ANSWER_TOO_LARGE)
        root, *observations = map(Observation.from_row, v3_trace_rows(answer.body))
        observations = dedupe_observations(observations)
        limit = self._settings.max_rows_per_trace
        if over_cap(len(observations), limit):
            return OversizedTrace(trace_id, [], rows_read=len(observations), limit=limit)
        return TraceRows.read(trace_id, [root, *observations])

    async def fetch_traces(
        self, roots: Sequence[TraceRoot], *, only: Sequence[Mapping[str, Any]] = ()
    ) -> AsyncIterator[TraceRows]:
        """Each trace's rows: listed traces (more than ``per_trace_fetch_max`` of them) with one bulk read
        of their span (see the module docstring), the others with one request each. ``only`` is not
        sent: legacy reads have no row filter (``/traces/{id}`` answers whole), the caller checks it."""
        unique = list({r.trace_id: r for r in roots}.values())
        bulk = [r for r in unique if r.trace_id in self._listed and r.row.get("id") == f"t-{r.trace_id}"]
        if not self._bulk_reads or len(bulk) <= self._settings.per_trace_fetch_max:
            bulk = []
        async for trace in self._bulk_read(bulk):
            yield trace
        chosen = {r.trace_id for r in bulk}
        for root in unique:
            if root.trace_id not in chosen:
                yield await self.fetch_trace(root.trace_id)

    async def _bulk_read(self, roots: Sequence[TraceRoot]) -> AsyncIterator[TraceRows]:
        """Listed traces from one scan of ``GET /observations``; a trace the scan did not find whole (an
        observation the listing named is missing) is read on its own."""
        limit = self._settings.max_rows_per_trace
        listed = {r.trace_id: self._listed[r.trace_id] for r in roots}
        scan = []
        for root in roots:
            if over_cap(len(listed[root.trace_id]), limit):  # the listing says so: nothing to read
                yield OversizedTrace(root.trace_id, [], rows_read=len(listed[root.trace_id]), limit=limit)
            else:
                scan.append(root)
        if not scan:
            return
        by_id = {r.trace_id: r for r in scan}
        whole: set[str] = set()  # read on their own by the scan itself (a window split down to one trace)

        async def fetch_one(root: TraceRoot) -> TraceRows:
            whole.add(root.trace_id)
            return await self.fetch_trace(root.trace_id)

        scanner = _SpanScanner(
            pages=self._window_pages,
            fetch_one=fetch_one,
            max_rows=self._settings.max_rows_in_memory,
            slack=timedelta(0),
            max_rows_per_trace=limit,
            now=lambda: datetime.now(UTC),
        )
        handed: set[str] = set()
        try:
            async for trace in scanner.scan(scan):
                handed.add(trace.trace_id)
                if isinstance(trace, OversizedTrace) or trace.trace_id in whole:
                    yield trace
                elif listed[trace.trace_id] <= {o.id for o in trace.observations}:
                    listed_root = Observation.from_row(by_id[trace.trace_id].row)
                    yield TraceRows.read(trace.trace_id, [listed_root, *trace.observations])
                else:
                    self.bulk_fallbacks += 1
                    yield await self.fetch_trace(trace.trace_id)
        except _WindowIgnored as ignored:
            self._bulk_reads = False
            log.warning("langfuse.bulk_reads_off", endpoint=OBSERVATIONS_V1.label, reason=str(ignored))
            for root in scan:
                if root.trace_id not in handed:
                    yield await self.fetch_trace(root.trace_id)

    async def _window_pages(self, window: TimeWindow) -> AsyncGenerator[list[Row], None]:
        """Every observation starting in ``window``, newest first, as v4 rows, a page at a time."""
        params = {"fromStartTime": format_timestamp(window.start), "toStartTime": format_timestamp(window.end)}
        first = True
        async with aclosing(self._pages(OBSERVATIONS_V1, OBSERVATIONS_V1.path, params, distinct_rows=True)) as pages:
            async for page in pages:
                rows = [v3_observation_row(o) for o in page if isinstance(o, Mapping)]
                if first and any(row_start(r) >= window.end for r in rows):
                    raise _WindowIgnored(f"rows starting after toStartTime={params['toStartTime']} came back")
                first = False
                yield rows

    # --- datasets and runs -------------------------------------------------------------------

    async def get_dataset(self, name: str) -> Dataset:
        return await self._datasets.get(name)

    async def list_experiments(
        self,
        datasets: Sequence[Dataset],
        since: datetime,
        until: datetime | None = None,
        *,
        tracked: Collection[str] = (),
    ) -> AsyncIterator[Experiment]:
        """The datasets' runs created in ``[since, until)``, and the ``tracked`` runs whenever created,
        each with its total item count.

        A real v3 server writes a run's ``updatedAt`` once, at creation, and lists runs newest
        (``createdAt``) first: nothing in the run list tells a run that still receives items. So runs
        are listed newest first until one created before ``since`` comes, and further only while a
        ``tracked`` run (one the caller still follows) has not been met. Each run's ``item_count`` is
        its total number of items (one cheap request: ``limit=1``, ``meta.totalItems``); a caller reads
        the items only when that count changed. ``end_time`` is None (v3 does not know it).
        """
        missing = set(tracked)
        for dataset in {d.id: d for d in datasets}.values():
            self._dataset_names[dataset.id] = dataset.name
            path = f"/api/public/datasets/{quote(dataset.name, safe='')}/runs"
            pages = self._pages(DATASET_RUNS, path, {})
            try:
                async for page in pages:
                    past_since = False
                    for run in page:
                        run_id = str(run["id"])
                        created = parse_timestamp(str(run["createdAt"]))
                        past_since = past_since or created < since
                        wanted = run_id in missing or created >= since
                        missing.discard(run_id)
                        if not wanted or (until is not None and created >= until):
                            continue
                        yield await self._experiment(dataset, run, created)
                    if past_since and not missing:
                        break
            finally:
                await pages.aclose()

    async def _experiment(self, dataset: Dataset, run: Mapping[str, Any], created: datetime) -> Experiment:
        metadata = run.get("metadata")
        experiment = Experiment(
            id=str(run["id"]),
            name=str(run["name"]),
            dataset_id=str(run.get("datasetId") or dataset.id),
            start_time=created,
            end_time=None,
            item_count=None,
            description=run.get("description"),
            metadata=metadata if isinstance(metadata, dict) else {},
        )
        return replace(experiment, item_count=await self._item_count(dataset.name, experiment))

    async def _item_count(self, dataset_name: str, experiment: Experiment) -> int | None:
        """The run's total number of items (2.x: its items are read and kept for the next call)."""
        if self.capabilities.run_items_by_run_name:
            items = await self._run_with_items(dataset_name, experiment.name)
            self._run_items[experiment.id] = items
            return len(items)
        answer = await self._transport.plain(
            DATASET_RUN_ITEMS,
            DATASET_RUN_ITEMS.path,
            params={"datasetId": experiment.dataset_id, "runName": experiment.name, "page": 1, "limit": 1},
        )
        body = answer.body
        total = (body.get("meta") or {}).get("totalItems") if isinstance(body, Mapping) else None
        return total if isinstance(total, int) and not isinstance(total, bool) else None

    async def _run_with_items(self, dataset_name: str, run_name: str) -> list[Mapping[str, Any]]:
        """2.x: ``GET /datasets/{name}/runs/{runName}`` answers the run with all its items."""
        path = f"/api/public/datasets/{quote(dataset_name, safe='')}/runs/{quote(run_name, safe='')}"
        answer = await self._transport.plain(DATASET_RUN, path)
        body = answer.body
        items = body.get("datasetRunItems") if isinstance(body, Mapping) else None
        if not isinstance(items, list):
            raise LangfuseResponseError(endpoint=DATASET_RUN.label, detail="no datasetRunItems list in the answer")
        return [i for i in items if isinstance(i, Mapping)]

    async def _run_item_rows(self, experiment: Experiment) -> AsyncIterator[Mapping[str, Any]]:
        if experiment.dataset_id is None:
            raise ValueError(f"dataset run {experiment.id} has no dataset id")
        if self.capabilities.run_items_by_run_name:
            items = self._run_items.pop(experiment.id, None)
            if items is None:
                dataset_name = self._dataset_names.get(experiment.dataset_id)
                if dataset_name is None:
                    raise ValueError(f"dataset run {experiment.id}: dataset {experiment.dataset_id} was not listed")
                items = await self._run_with_items(dataset_name, experiment.name)
            for item in items:
                yield item
            return
        params: dict[str, QueryValue] = {"datasetId": experiment.dataset_id, "runName": experiment.name}
        async for page in self._pages(DATASET_RUN_ITEMS, DATASET_RUN_ITEMS.path, params):
            for item in page:
                yield item

    async def list_experiment_items(self, experiment: Experiment, since: datetime) -> AsyncIterator[ExperimentItem]:
        """The run's items created since ``since``, joined to their dataset items (cached)."""
        seen: set[str] = set()
        async for run_item in self._run_item_rows(experiment):
            created = parse_timestamp(str(run_item["createdAt"]))
            run_item_id = str(run_item.get("id") or "")
            if created < since or run_item_id in seen:
                continue
            seen.add(run_item_id)
            dataset_item_id = str(run_item["datasetItemId"])
            item = await self._items.get(experiment.dataset_id, dataset_item_id)
            yield ExperimentItem(
                trace_id=str(run_item["traceId"]),
                observation_id=run_item.get("observationId"),
                experiment_id=str(run_item.get("datasetRunId") or experiment.id),
                experiment_name=str(run_item.get("datasetRunName") or experiment.name),
                dataset_item_id=dataset_item_id,
                dataset_id=experiment.dataset_id,
                start_time=created,
                environment=None,
                input=item.get("input") if item is not None else None,
                output=None,
                expected_output=item.get("expectedOutput") if item is not None else None,
                metadata={},
                item_metadata=_mapping(item.get("metadata")) if item is not None else {},
            )


class _WindowIgnored(Exception):
    """The server answered ``GET /observations`` without applying ``toStartTime`` (older 2.x)."""


class _SpanScanner(TraceScanner):
    """The window scan over exactly the traces' span: earliest start to latest known end (an unfinished
    trace counts from its start), to the millisecond. No slack and no "now": whatever lies outside is
    caught by the listed ids (:meth:`V3Reader._bulk_read`), and one request for such a trace costs less
    than reading minutes more of everyone's observations."""

    def window_for(self, roots: Sequence[TraceRoot]) -> TimeWindow:
        start = min(r.start_time for r in roots)
        end = max(max(r.end_time or r.start_time, r.start_time) for r in roots)
        return TimeWindow(start, end + timedelta(milliseconds=1))  # toStartTime is exclusive


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}

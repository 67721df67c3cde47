"""Reads from a Langfuse v4 server: observations (v2 API), experiments and experiment items.

Cursor-paged, read as plain JSON through the transport (the query encoded as the ``langfuse`` package's
generated client encodes it). Observation rows are handed on as the JSON Langfuse sent (input/output raw
strings; fields of groups not requested are absent).
"""

from __future__ import annotations

import functools
import json
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing, contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import structlog
from langfuse.api.core.datetime_utils import serialize_datetime

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.data.rows import json_in_text
from trace_scorer.data.times import parse_timestamp
from trace_scorer.extract.rows import Observation, dedupe_observations
from trace_scorer.langfuse.errors import LangfuseAnswerTooLarge, LangfuseHTTPError, LangfuseResponseError
from trace_scorer.langfuse.http.clock import Clock
from trace_scorer.langfuse.http.endpoints import (
    EXPERIMENT_ITEMS,
    EXPERIMENTS,
    OBSERVATIONS_V2,
    Endpoint,
)
from trace_scorer.langfuse.http.transport import QueryValue, Transport
from trace_scorer.langfuse.reads.dataset_items import DatasetItemCache, DatasetsByName
from trace_scorer.langfuse.reads.filters import root_matches, v4_root_query, v4_trace_rows_query
from trace_scorer.langfuse.reads.rows import StreamDeduper, trace_root_from_row
from trace_scorer.langfuse.reads.trace_scan import (
    ANSWER_TOO_LARGE,
    TOO_LARGE_ROW,
    IdReads,
    OversizedTrace,
    TraceScanner,
    over_cap,
)
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

log = structlog.get_logger(__name__)

#: Field groups of a trace's rows: what extraction reads (tool calls, messages, models, tokens and cost).
BODY_FIELDS = "core,basic,time,io,metadata,model,usage"
#: Field groups of root rows: what sources filter and sample on (the trace's name, tags, release), and all
#: a read of the trace's rows would return of them, so that the read leaves them out (issue #29).
ROOT_FIELDS = BODY_FIELDS + ",trace_context"
#: The fields of the ``trace_context`` group: taken out of a listed root row that stands in for its read.
TRACE_CONTEXT_KEYS = ("tags", "release", "traceName")
#: A root row too large to read with its input and output: listed without them (its trace's own read
#: then meets the same row and skips the trace).
SLIM_ROOT_FIELDS = "core,basic,time,metadata,trace_context"
#: The key a root row listed with :data:`SLIM_ROOT_FIELDS` is marked with: it cannot stand in for its read.
LISTED_SLIM = "_listedSlim"
EXPERIMENT_FIELDS = "core,metadata"
EXPERIMENT_ITEM_FIELDS = "core,dataset,io,metadata,itemMetadata"
#: Observation pages are not made smaller than this when Langfuse answers 422 (a read too heavy).
MIN_PAGE_SIZE = 10
#: Server maximum page size of the experiments endpoints.
EXPERIMENTS_MAX_LIMIT = 100


def _camel(name: str) -> str:
    """``from_start_time`` → ``fromStartTime`` (the API's query parameter names)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


class V4Reader:
    #: Langfuse v4 stores spans exported by OpenTelemetry, which exports a span when it ends: a root row
    #: appears only once the trace's root ended, however long ago it started.
    rows_appear_at_end = True

    @property
    def id_reads(self) -> IdReads:
        """How many traces one ``traceId any of`` read holds: the trace scanner's measure."""
        return self.scanner.id_reads

    def __init__(
        self,
        *,
        transport: Transport,
        settings: LangfuseSettings,
        items: DatasetItemCache,
        clock: Clock,
        expand_metadata: Sequence[str] = (),
    ) -> None:
        self._transport = transport
        self._settings = settings
        self._items = items
        self._clock = clock
        self._slack = timedelta(seconds=settings.trace_slack)
        #: Metadata keys returned untruncated (Langfuse cuts metadata values at 200 characters).
        self._expand_metadata = ",".join(expand_metadata) or None
        self._datasets = DatasetsByName(transport)
        #: Rows per observation page; halved when Langfuse finds a read too heavy (422).
        self.page_size = settings.page_size
        self.scanner = TraceScanner(
            pages=self._window_pages,
            fetch_one=self.fetch_trace,
            max_rows=settings.max_rows_in_memory,
            slack=self._slack,
            max_rows_per_trace=settings.max_rows_per_trace,
            now=clock.now,
            pages_of=self._trace_pages,
            id_reads=IdReads(self._trace_rows_url_length, page_rows=lambda: self.page_size),
        )

    # --- paging ------------------------------------------------------------------------------

    def _cursor_pages(self, endpoint: Endpoint, params: Mapping[str, QueryValue]) -> AsyncGenerator[list[Row], None]:
        """Follow ``meta.cursor`` until it is absent, ``params`` on every page."""

        async def body(cursor: str | None) -> Any:
            return (await self._transport.plain(endpoint, endpoint.path, params={**params, "cursor": cursor})).body

        return self._body_pages(endpoint, body)

    async def _body_pages(
        self, endpoint: Endpoint, fetch: Callable[[str | None], Awaitable[Any]]
    ) -> AsyncGenerator[list[Row], None]:
        """Follow ``meta.cursor`` until it is absent; a repeated cursor is an error, not a loop."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            body = await fetch(cursor)
            if not isinstance(body, Mapping):
                raise LangfuseResponseError(endpoint=endpoint.label, detail="the answer is not a JSON object")
            data = body.get("data") or []
            yield list(data)
            cursor = (body.get("meta") or {}).get("cursor")
            if not cursor:
                return
            if cursor in seen:
                raise LangfuseResponseError(endpoint=endpoint.label, detail="the same cursor came back twice")
            seen.add(cursor)

    def _observation_pages(
        self, fields: str, *, slim_fields: str | None = None, **query: Any
    ) -> AsyncGenerator[list[Row], None]:
        """Observation pages as plain JSON. Not through the generated client: it parses every page into
        its models (~0.25 ms a row, 25 times the JSON decoding) and the rows handed on are the plain JSON
        anyway; on a busy worker that parsing held the event loop long enough to starve the judges.
        The query is encoded as the generated client encodes it (same names, same time format).

        A 422 (Langfuse's ClickHouse memory or time limit on a heavy read) halves the page size and asks
        again from the same cursor; the smaller size is kept for later reads (logged). Below
        :data:`MIN_PAGE_SIZE` the error is raised.

        An answer over ``max_answer_bytes`` halves the page for the rest of this read, down to one row;
        one row over it is asked again with ``slim_fields`` (without its input and output): a root row
        is then listed without them; a body row (no ``slim_fields``) comes with its core fields only,
        marked :data:`TOO_LARGE_ROW` (its trace is skipped), and the read goes on past it in whole pages."""
        params: dict[str, QueryValue] = {"fields": fields, "expandMetadata": self._expand_metadata}
        for name, value in query.items():
            params[_camel(name)] = serialize_datetime(value) if isinstance(value, datetime) else value
        limit = self.page_size

        async def fetch(cursor: str | None) -> Any:
            nonlocal limit
            while True:
                try:
                    answer = await self._transport.plain(
                        OBSERVATIONS_V2,
                        OBSERVATIONS_V2.path,
                        params={**params, "limit": min(limit, self.page_size), "cursor": cursor},
                    )
                    return answer.body
                except LangfuseAnswerTooLarge as error:
                    if limit > 1:
                        limit = max(1, min(limit, self.page_size) // 2)
                        log.warning("langfuse.answer_too_large", endpoint=error.endpoint, page_size=limit)
                        continue
                    slim = {**params, "fields": slim_fields or "core", "limit": 1, "cursor": cursor}
                    log.warning(
                        "langfuse.answer_too_large", endpoint=error.endpoint, page_size=1, fields=slim["fields"]
                    )
                    body = (await self._transport.plain(OBSERVATIONS_V2, OBSERVATIONS_V2.path, params=slim)).body
                    if isinstance(body, Mapping):
                        for row in body.get("data") or []:
                            if slim_fields is None:
                                row[TOO_LARGE_ROW] = error.limit
                            else:
                                row[LISTED_SLIM] = True
                    limit = self.page_size  # past that row, whole pages again
                    return body
                except LangfuseHTTPError as error:
                    if error.status != 422 or self.page_size <= MIN_PAGE_SIZE:
                        raise
                    self.page_size = max(MIN_PAGE_SIZE, self.page_size // 2)
                    log.warning(
                        "langfuse.read_too_heavy",
                        endpoint=OBSERVATIONS_V2.label,
                        page_size=self.page_size,
                        reason=error.message,
                    )

        return self._body_pages(OBSERVATIONS_V2, fetch)

    def _window_pages(self, window: TimeWindow, row_filter: str | None = None) -> AsyncGenerator[list[Row], None]:
        return self._observation_pages(
            BODY_FIELDS, from_start_time=window.start, to_start_time=window.end, filter=row_filter
        )

    def _trace_pages(
        self, window: TimeWindow, trace_ids: Sequence[str], children_only: bool = False
    ) -> AsyncGenerator[list[Row], None]:
        """The rows of these traces starting in ``window`` (the structured filter's ``traceId any of``);
        ``children_only``: without their roots (the listing read them)."""
        query = v4_trace_rows_query(window, trace_ids, children_only=children_only)
        return self._observation_pages(BODY_FIELDS, **query)

    def _trace_rows_url_length(self, trace_ids: Sequence[str]) -> int:
        """Bytes of the URL (path and query, as httpx encodes them) of a first page of
        :meth:`_trace_pages` for these ids (the longer, children-only query); the window's times have a
        fixed length."""
        now = self._clock.now()
        query = v4_trace_rows_query(TimeWindow(now - self._slack, now), trace_ids, children_only=True)
        params = {"fields": BODY_FIELDS, "expandMetadata": self._expand_metadata, "limit": str(self.page_size)}
        for name, value in query.items():
            params[_camel(name)] = serialize_datetime(value) if isinstance(value, datetime) else value
        encoded = httpx.QueryParams({k: v for k, v in params.items() if v is not None})
        path = urlsplit(getattr(self._transport, "base_url", "")).path.rstrip("/") + OBSERVATIONS_V2.path
        return len(path) + 1 + len(str(encoded))

    # --- traces ------------------------------------------------------------------------------

    async def list_trace_roots(self, window: TimeWindow, trace_filter: TraceFilter) -> AsyncIterator[TraceRoot]:
        """One root per trace starting in ``window`` and matching the filter, newest first."""
        for root in (await self.list_roots(window, trace_filter)).roots:
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
        """One root per trace starting in the window and matching the filter, newest first; no more than
        ``max_traces`` of the earliest, none that ``known`` names.

        A trace can have several root rows (several parentless spans, or an app root under a remote
        parent): the earliest (then the smallest id) stands for the trace, whatever the page order; all
        of them, with every field a read of the trace's rows returns, are its ``listed_roots`` (a read of
        its rows then leaves them out) — unless the filter has a metadata condition, which each root row
        may or may not meet, or one was listed without its input and output.
        The filter is checked on our side too (:func:`root_matches`).

        Rows come newest first, so the earliest ``max_traces`` are known only at the end: whenever more are
        held, the newest are dropped and the listing's end moves to the earliest start among them (rows
        still to come are older). Memory stays at ``max_traces`` roots and a page, whatever the window."""
        roots: dict[str, TraceRoot] = {}
        #: Every root row listed of each trace held (by row id): they stand in for the roots' reads.
        root_rows: dict[str, dict[str, Row]] = {}
        end = window.end
        deduper = StreamDeduper[TraceRoot]()

        def keep(listed: list[TraceRoot]) -> None:
            fresh = [root for root in listed if root.start_time < end]
            done = known(fresh) if known is not None and fresh else ()
            for root in fresh:
                if root.trace_id in done:
                    continue
                root_rows.setdefault(root.trace_id, {})[root.observation_id] = root.row
                held = roots.get(root.trace_id)
                if held is None or (root.start_time, root.observation_id) < (held.start_time, held.observation_id):
                    roots[root.trace_id] = root

        query = v4_root_query(window, trace_filter, ended_since=ended_since)
        pages = self._observation_pages(ROOT_FIELDS, slim_fields=SLIM_ROOT_FIELDS, **query)
        async for page in pages:
            keep(deduper.push(map(trace_root_from_row, page)))
            if max_traces and len(roots) > max_traces:
                end, roots = _earliest(roots, max_traces, window.start, end)
                _drop_all_but(root_rows, roots)
        keep(deduper.flush())
        if max_traces and len(roots) > max_traces:
            end, roots = _earliest(roots, max_traces, window.start, end)
        ordered = [root for root in roots.values() if root_matches(root, trace_filter)]
        ordered.sort(key=lambda r: (r.start_time, r.trace_id), reverse=True)
        # A metadata condition is checked on each root row (a trace's second root may lack the key): then
        # the listing may not hold all of a trace's roots, and reads read them.
        if not trace_filter.metadata:
            ordered = [with_listed_roots(root, root_rows[root.trace_id]) for root in ordered]
        return RootListing(ordered, end)

    async def fetch_trace(self, root: TraceRoot, row_filter: str | None = None) -> TraceRows:
        """One trace's rows, with ``traceId=…`` (bounded by the root's times ± slack, as Langfuse asks);
        ``row_filter``: a ``filter`` JSON narrowing the rows (:meth:`fetch_traces`' ``only``).

        Reading stops once more rows than ``max_rows_per_trace`` came, or at one row longer than
        ``max_answer_bytes``: an :class:`OversizedTrace`."""
        start = root.start_time - self._slack
        end = max(root.end_time or self._clock.now(), root.start_time) + self._slack
        limit = self._settings.max_rows_per_trace
        rows: list[Observation] = []
        pages = self._observation_pages(
            BODY_FIELDS, trace_id=root.trace_id, from_start_time=start, to_start_time=end, filter=row_filter
        )
        async with aclosing(pages):
            async for page in pages:
                if cap := next((row[TOO_LARGE_ROW] for row in page if TOO_LARGE_ROW in row), None):
                    return OversizedTrace(root.trace_id, [], rows_read=len(rows), limit=cap, reason=ANSWER_TOO_LARGE)
                rows.extend(map(Observation.from_row, page))
                if over_cap(len(rows), limit) and over_cap(len(rows := dedupe_observations(rows)), limit):
                    return OversizedTrace(root.trace_id, [], rows_read=len(rows), limit=limit)
        return TraceRows.read(root.trace_id, rows)

    async def fetch_traces(
        self, roots: Sequence[TraceRoot], *, only: Sequence[Mapping[str, Any]] = ()
    ) -> AsyncIterator[TraceRows]:
        """Each trace's rows: one request per trace for a few, one window scan for more. ``only``: the
        server is asked for the rows matching these ``filter`` conditions alone (the time and trace
        conditions stay simple parameters, which the server keeps beside a filter on other columns)."""
        row_filter = json.dumps(list(only), ensure_ascii=False) if only else None
        if len(roots) <= self._settings.per_trace_fetch_max:
            for root in {r.trace_id: r for r in roots}.values():
                yield await self.fetch_trace(root, row_filter)
            return
        scanner = self.scanner
        if row_filter is not None:
            scanner = TraceScanner(
                pages=functools.partial(self._window_pages, row_filter=row_filter),
                fetch_one=functools.partial(self.fetch_trace, row_filter=row_filter),
                max_rows=self._settings.max_rows_in_memory,
                slack=self._slack,
                max_rows_per_trace=self._settings.max_rows_per_trace,
                now=self._clock.now,
            )
        async for trace in scanner.scan(roots):
            yield trace

    # --- datasets and experiments ------------------------------------------------------------

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
        """Experiments of these datasets with items started in ``[since, until)``, each once.

        ``tracked`` is ignored: v4 finds experiments by their items' activity in the window."""
        if not datasets:
            return
        dataset_ids = ",".join(sorted({d.id for d in datasets}))

        params: dict[str, QueryValue] = {
            "fields": EXPERIMENT_FIELDS,
            "limit": min(self._settings.page_size, EXPERIMENTS_MAX_LIMIT),
            "fromStartTime": serialize_datetime(since),
            "toStartTime": serialize_datetime(until) if until is not None else None,
            "datasetId": dataset_ids,
        }
        seen: set[str] = set()
        async for page in self._cursor_pages(EXPERIMENTS, params):
            for row in page:
                with _readable(EXPERIMENTS):
                    if row["id"] in seen:
                        continue
                    seen.add(row["id"])
                    experiment = _experiment(row)
                yield experiment

    async def list_experiment_items(self, experiment: Experiment, since: datetime) -> AsyncIterator[ExperimentItem]:
        """The experiment's items started since ``since``, each once, with the expected output.

        An item row without an ``expectedOutput`` key (not an explicit null) is joined to its dataset
        item (cached per dataset).
        """

        params: dict[str, QueryValue] = {
            "fields": EXPERIMENT_ITEM_FIELDS,
            "limit": min(self._settings.page_size, EXPERIMENTS_MAX_LIMIT),
            "fromStartTime": serialize_datetime(since),
            "experimentId": experiment.id,
        }
        seen: set[str] = set()
        async for page in self._cursor_pages(EXPERIMENT_ITEMS, params):
            for row in page:
                with _readable(EXPERIMENT_ITEMS):
                    if row["id"] in seen:
                        continue
                    seen.add(row["id"])
                    item = await self._experiment_item(row)
                yield item

    async def _experiment_item(self, row: Mapping[str, Any]) -> ExperimentItem:
        """One item row as an :class:`ExperimentItem`.

        Real servers send ``input``, ``output`` and ``expectedOutput`` as raw strings, and always send
        ``expectedOutput``: ``""`` when the runner recorded none. JSON strings are parsed (a string that is
        not JSON stays a string). An ``expectedOutput`` that is ``""`` or absent is taken from the dataset
        item (cached per dataset; a deleted item gives None); an explicit null is kept (no expected output).
        """
        dataset_id = row.get("experimentDatasetId")
        raw_expected = row.get("expectedOutput", "")
        input_value = _json_value(row.get("input"))
        if isinstance(raw_expected, str) and raw_expected == "":
            item_id = str(row["experimentItemId"])
            item = await self._items.get(dataset_id, item_id) if dataset_id else None
            # The dataset item's fields are JSON values already (not raw strings): taken as they are.
            expected = item.get("expectedOutput") if item is not None else None
            if input_value in (None, "") and item is not None:
                input_value = item.get("input")
        else:
            expected = _json_value(raw_expected)
        return ExperimentItem(
            trace_id=str(row["traceId"]),
            observation_id=str(row["id"]),
            experiment_id=str(row["experimentId"]),
            experiment_name=str(row.get("experimentName") or ""),
            dataset_item_id=str(row["experimentItemId"]),
            dataset_id=dataset_id,
            start_time=parse_timestamp(str(row["startTime"])),
            environment=row.get("environment"),
            input=input_value,
            output=_json_value(row.get("output")),
            expected_output=expected,
            metadata=_mapping(row.get("metadata")),
            item_metadata=_mapping(row.get("experimentItemMetadata")),
        )


@contextmanager
def _readable(endpoint: Endpoint) -> Iterator[None]:
    """A row without a required field (or not an object) is the server's fault: a
    :class:`LangfuseResponseError` naming the endpoint, as the package's models raised it."""
    try:
        yield
    except (KeyError, TypeError, ValueError) as error:
        raise LangfuseResponseError(endpoint=endpoint.label, detail=f"unreadable row: {error!r}") from None


def _experiment(row: Mapping[str, Any]) -> Experiment:
    end = row.get("endTime")
    return Experiment(
        id=str(row["id"]),
        name=str(row["name"]),
        dataset_id=row.get("datasetId"),
        start_time=parse_timestamp(str(row["startTime"])),
        end_time=parse_timestamp(str(end)) if end else None,
        item_count=row.get("itemCount"),
        description=row.get("description"),
        metadata=_mapping(row.get("metadata")),
    )


def with_listed_roots(root: TraceRoot, rows: Mapping[str, Row]) -> TraceRoot:
    """``root`` with the trace's listed root rows as a read of its rows returns them (without the
    ``trace_context`` fields); none if one was listed without its input and output."""
    if any(LISTED_SLIM in row for row in rows.values()):
        return root
    body_rows = tuple({k: v for k, v in row.items() if k not in TRACE_CONTEXT_KEYS} for row in rows.values())
    return replace(root, listed_roots=body_rows)


def _drop_all_but(rows: dict[str, dict[str, Row]], kept: Mapping[str, TraceRoot]) -> None:
    """Forget the root rows of traces the listing no longer holds (memory stays at what it holds)."""
    for trace_id in [t for t in rows if t not in kept]:
        del rows[trace_id]


def _earliest(
    roots: dict[str, TraceRoot], count: int, start: datetime, end: datetime
) -> tuple[datetime, dict[str, TraceRoot]]:
    """The listing's new end and the roots before it: the start of the earliest root beyond the first
    ``count`` (by start). Never at the window's start (that window could never move on): then all are kept."""
    cut = sorted(root.start_time for root in roots.values())[count]
    if cut <= start:
        return end, roots
    return cut, {trace_id: root for trace_id, root in roots.items() if root.start_time < cut}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _json_value(value: Any) -> Any:
    """A raw string as the JSON object, list or string it holds; anything else as it is.

    A string that is not JSON stays a string, and so does one holding a JSON number, boolean or null
    (``"2"`` is as likely the text ``2`` as the number, and ``"null"`` must not read as "absent")."""
    return json_in_text(value, '{["', skip_blanks=True)

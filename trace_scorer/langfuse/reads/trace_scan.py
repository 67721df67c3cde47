"""Many traces' observations from one windowed scan, grouped by trace, with a cap on rows held.

One request per trace burns the plan's request budget (30/min on Cloud Hobby); one scan of *all*
observations in the traces' time span, 1000 rows a page, grouped by ``traceId`` client-side, costs
``rows / 1000`` requests instead. Rows of traces we were not asked for are dropped as they arrive.

Memory: rows come newest first, so once the scan is past a trace's root start (minus the slack) the
trace is complete and handed on. If the rows held still exceed ``max_rows``, the scan stops, the
remaining traces are split in two halves by start time, and each half is scanned over its own,
narrower window, recursively; a single trace is fetched on its own (``traceId=…``).

A trace with more rows than ``max_rows_per_trace`` (0: no cap) is not held: as soon as the scan (or
its own fetch) reaches the cap, its rows are dropped and it is handed on as an :class:`OversizedTrace`
(no rows). Its remaining rows are not read (issue #22: a trace with 100,000 observations made the scan
page through ~80,000 of them to reach the other traces): the scan stops there, and the traces still
pending are read around the oversized trace's span (its root's start to end) — those whose own span
overlaps it one request each (``traceId=…``, with the slack), the others by scans over narrower windows
whose slack stops at its span. The price: a row of such a neighbour lying outside its own root's span
and inside the oversized trace's is not read. Once every trace asked for is handed on, the scan stops
reading.

Where the server can filter by trace id (v4: ``traceId any of``), a scan asks for its traces' rows only
(``pages_of``): a few traces of a live stream then cost the pages of their own rows, not of every trace
that ran beside them within the slack (issue #29: ~30 pages a tick at 10 traces/s with the 5-minute slack).
A request holds as many ids as :class:`IdReads` lets it — its URL within :data:`URL_BUDGET` bytes, measured
on the request as it will be encoded (ids differ in length) — and a longer list is read in consecutive
runs of that many (by start time). A server that refuses a request as too long (414 from a proxy, 431 from
Node) halves the ids a request holds from then on, and the scan asks again. When the listing that found the
traces held all their root rows with every field a read returns (:attr:`TraceRoot.listed_roots`), the
read leaves the roots out (``isRootObservation = false``) and the listed rows stand in for them: a root
is then read once, in the listing, not again with its trace's rows (~15 % of the rows of a live stream).

A row the page source could read only without its input and output (marked :data:`TOO_LARGE_ROW`: alone
over ``max_answer_bytes``) skips its trace (``answer too large``) and the scan goes on. A source that
cannot do that raises :class:`LangfuseAnswerTooLarge`: then each trace still pending is read on its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime, timedelta

import structlog

from trace_scorer.data.rows import replaces
from trace_scorer.extract.rows import Observation, sort_observations, started
from trace_scorer.langfuse.errors import LangfuseAnswerTooLarge, LangfuseHTTPError
from trace_scorer.langfuse.types import Row, TimeWindow, TraceRoot, TraceRows

PageSource = Callable[[TimeWindow], AsyncGenerator[list[Row], None]]
#: A page source that also keeps to these traces' rows (the ids) within the window; True: without their
#: root rows (the listing read them: :attr:`TraceRoot.listed_roots`).
IdPageSource = Callable[[TimeWindow, Sequence[str], bool], AsyncGenerator[list[Row], None]]
FetchOne = Callable[[TraceRoot], Awaitable[TraceRows]]

#: The reasons an oversized trace is skipped for (the ``reason`` of ``traces_skipped_total``): more rows than
#: ``max_rows_per_trace``, or a row that does not fit in an answer of ``max_answer_bytes``.
TOO_MANY_ROWS = "too many observations"
ANSWER_TOO_LARGE = "answer too large"
#: The key a page source adds to a row it could only read without its input and output (the row alone was
#: over ``max_answer_bytes``): the value is that cap. The row's trace is skipped; reading goes on past it.
TOO_LARGE_ROW = "_answerTooLarge"
log = structlog.get_logger(__name__)

#: Trace ids in one id-filtered read before its URL is measured (and the most a read holds whatever their
#: length): ~40 characters each once URL-encoded.
MAX_IDS_PER_SCAN = 150
#: Bytes of an id-filtered read's URL (path and query, as encoded): nginx's default buffer for a request
#: line is 8 KB (longer: 414), in front of many self-hosted servers; Node's own limit, for the request line
#: and headers together, is 16 KB (longer: 431). Room is left for the method and the HTTP version (15
#: bytes) and a later page's cursor (``&cursor=`` and a base64 JSON of a time and two ids: ~150 bytes),
#: twice over.
URL_BUDGET = 8192 - 384
#: The most ids a read holds however short they are (a bound on one request's work on the server).
MAX_IDS_PER_READ = 400
#: Statuses of a server (or its proxy) refusing a request line or head as too long.
TOO_LONG = (414, 431)


#: Share of a page the rows of one id-filtered read are expected to fill (traces' row counts vary: a read
#: just over a page costs a second request for a few rows).
PAGE_FILL = 0.9


class IdReads:
    """How many trace ids one id-filtered read holds: as many as keep its URL within :data:`URL_BUDGET`
    (``url_length``: the encoded length of a read of these ids), up to :data:`MAX_IDS_PER_READ`, never
    more than half of a read the server refused as too long (414/431; remembered for the process), and,
    once reads have shown how many rows a trace has, as many as fill :data:`PAGE_FILL` of one page
    (``page_rows``): a read is paid by the page."""

    def __init__(
        self,
        url_length: Callable[[Sequence[str]], int],
        budget: int = URL_BUDGET,
        page_rows: Callable[[], int] | None = None,
        max_ids: int = MAX_IDS_PER_READ,
    ) -> None:
        self._url_length = url_length
        self._page_rows = page_rows
        self.budget = budget
        self.max_ids = max_ids
        #: Rows and traces of the id-filtered reads so far (each trace's rows, duplicates included).
        self.rows_read = 0
        self.traces_read = 0

    def read(self, traces: int, rows: int) -> None:
        """One id-filtered read of ``traces`` traces came with ``rows`` rows."""
        self.traces_read += traces
        self.rows_read += rows

    def by_rows(self) -> int:
        """The most traces whose rows are expected to fill one page (:data:`MAX_IDS_PER_SCAN` before the
        first read: a trace's rows are not known yet)."""
        if self._page_rows is None:
            return self.max_ids
        if not self.rows_read:
            return min(self.max_ids, MAX_IDS_PER_SCAN)
        per_trace = self.rows_read / max(1, self.traces_read)
        return max(1, int(PAGE_FILL * self._page_rows() / per_trace))

    def fitting(self, ids: Sequence[str], *, by_rows: bool = True) -> int:
        """How many of ``ids``, from the first, one read holds (at least one); ``by_rows=False``: by the
        request's limits alone (a group made to fill a page may be read at once even if it is over it)."""
        high = min(len(ids), self.max_ids, self.by_rows() if by_rows else len(ids))
        if high <= 1 or self._url_length(ids[:high]) <= self.budget:
            return max(1, high)
        low = 1  # fits (one id always goes: a read of one trace is the least there is)
        while high - low > 1:
            middle = (low + high) // 2
            if self._url_length(ids[:middle]) <= self.budget:
                low = middle
            else:
                high = middle
        return low

    def refused(self, ids: int) -> None:
        """A read of ``ids`` ids was refused as too long: reads hold at most half as many from now on."""
        self.max_ids = max(1, min(self.max_ids, ids // 2))
        log.warning("langfuse.request_too_long", ids_per_read=self.max_ids)


@dataclass(frozen=True, slots=True)
class OversizedTrace(TraceRows):
    """A trace over a cap: no rows (none are kept), how many were read before reading stopped, the cap
    (rows, or bytes of one answer) and the reason."""

    rows_read: int = 0
    limit: int = 0
    reason: str = TOO_MANY_ROWS


def over_cap(rows: int, limit: int) -> bool:
    return limit > 0 and rows > limit


class TraceScanner:
    def __init__(
        self,
        *,
        pages: PageSource,
        fetch_one: FetchOne,
        max_rows: int,
        slack: timedelta,
        max_rows_per_trace: int = 0,
        now: Callable[[], datetime],
        pages_of: IdPageSource | None = None,
        id_reads: IdReads | None = None,
    ) -> None:
        self._pages = pages
        self._pages_of = pages_of
        # Without a measure of the URL (a source built for tests), a read holds MAX_IDS_PER_SCAN ids.
        self.id_reads = id_reads or IdReads(lambda ids: 0, max_ids=MAX_IDS_PER_SCAN)
        self._fetch_one = fetch_one
        self._max_rows = max_rows
        self._max_rows_per_trace = max_rows_per_trace
        self._slack = slack
        self._now = now
        #: How often a window was too full and split. For tests and benches only.
        self.splits = 0
        #: Most rows held at once (for tests and logs).
        self.peak_rows = 0

    def window_for(self, roots: Sequence[TraceRoot]) -> TimeWindow:
        """The span in which these traces' observations start: root starts to root ends, ± slack."""
        start = min(r.start_time for r in roots) - self._slack
        end = max(max(r.end_time or self._now(), r.start_time) for r in roots) + self._slack
        return TimeWindow(start, end)

    def core_span(self, root: TraceRoot) -> TimeWindow:
        """Where a trace's own rows lie: its root's start to its end (no slack; a running trace: to now)."""
        end = max(root.end_time or self._now(), root.start_time)
        return TimeWindow(root.start_time, end + timedelta(milliseconds=1))

    def clipped_window(self, roots: Sequence[TraceRoot], excluded: Sequence[TimeWindow]) -> TimeWindow:
        """:meth:`window_for` the roots, its slack cut where an excluded span begins (the roots' spans lie
        between excluded ones): an oversized trace's rows are not read again for its neighbours' slack."""
        window = self.window_for(roots)
        first = min(r.start_time for r in roots)
        start = max([window.start, *(e.end for e in excluded if e.end <= first)])
        end = min([window.end, *(e.start for e in excluded if e.start >= first)])
        return TimeWindow(start, end) if start < end else window

    async def scan(self, roots: Sequence[TraceRoot]) -> AsyncIterator[TraceRows]:
        unique = list({r.trace_id: r for r in roots}.values())
        if unique:
            async for trace in self._scan(unique, ()):
                yield trace

    async def _scan(self, roots: list[TraceRoot], excluded: tuple[TimeWindow, ...]) -> AsyncIterator[TraceRows]:
        """Read ``roots``' rows, never over the ``excluded`` spans (those of oversized traces)."""
        inside, groups = self._around(roots, excluded)
        for root in inside:
            yield await self._fetch_one(root)
        for group in groups:
            async for trace in self._scan_group(group, excluded):
                yield trace

    async def _scan_group(self, roots: list[TraceRoot], excluded: tuple[TimeWindow, ...]) -> AsyncIterator[TraceRows]:
        """One scan of ``roots``' window (which overlaps no excluded span); split or narrowed when needed."""
        if len(roots) == 1:
            yield await self._fetch_one(roots[0])
            return
        if self._pages_of is not None:
            roots.sort(key=lambda r: r.start_time)
            ids = [r.trace_id for r in roots]
            if self.id_reads.fitting(ids, by_rows=False) < len(roots):
                # Consecutive runs by start time, each as many ids as a read holds and fill a page.
                fits = self.id_reads.fitting(ids)
                while roots:
                    run, roots = roots[:fits], roots[fits:]
                    async for trace in self._scan_group(run, excluded):
                        yield trace
                    fits = self.id_reads.fitting([r.trace_id for r in roots]) if roots else 0
                return
        pending = {r.trace_id: r for r in roots}
        held: dict[str, dict[str, Observation]] = {}
        held_rows = 0
        overflow = False
        oversized: list[TimeWindow] = []
        too_large = False
        too_long = False
        rows_read = 0
        # Roots the listing read (all of a trace's) are not read again: a read is paid by the page.
        children_only = self._pages_of is not None and all(r.listed_roots is not None for r in roots)
        if children_only:  # the listing kept one row an id (the newest): held as they are
            for root in roots:
                held[root.trace_id] = {r.id: r for r in map(Observation.from_row, map(dict, root.listed_roots or ()))}
                held_rows += len(held[root.trace_id])
        try:
            window = self.clipped_window(roots, excluded)
            if self._pages_of is None:
                source = self._pages(window)
            else:
                source = self._pages_of(window, list(pending), children_only)
            async with aclosing(source) as pages:
                async for page in pages:
                    rows_read += len(page)
                    # Each row is read into its record once, here: its times parsed for the scan and after.
                    records = list(map(Observation.from_row, page))
                    for record in records:
                        row = record.row
                        trace_id = row.get("traceId")
                        if trace_id not in pending:
                            continue
                        if TOO_LARGE_ROW in row:
                            held_rows -= len(held.pop(trace_id, {}))
                            del pending[trace_id]  # its further rows are dropped as they arrive
                            yield OversizedTrace(trace_id, [], limit=row[TOO_LARGE_ROW], reason=ANSWER_TOO_LARGE)
                            continue
                        group = held.setdefault(trace_id, {})
                        key = record.id
                        if key in group:
                            if replaces(record.updated_at, group[key].updated_at):
                                group[key] = record
                        else:
                            group[key] = record
                            held_rows += 1
                            if over_cap(len(group), self._max_rows_per_trace):
                                held_rows -= len(held.pop(trace_id))
                                root = pending.pop(trace_id)  # the rest of this page's rows of it are dropped
                                oversized.append(self.core_span(root))
                                yield OversizedTrace(trace_id, [], rows_read=len(group), limit=self._max_rows_per_trace)
                    self.peak_rows = max(self.peak_rows, held_rows)
                    if records:
                        oldest = min(map(started, records))
                        done = [t for t, root in pending.items() if root.start_time - self._slack > oldest]
                        for trace_id in done:
                            rows = held.pop(trace_id, {})
                            held_rows -= len(rows)
                            del pending[trace_id]
                            yield TraceRows(trace_id, sort_observations(list(rows.values())))
                    if not pending:
                        break  # every trace asked for is handed on: the rest of the window is not needed
                    if oversized:
                        break  # the rest of the window holds more of the oversized trace: read around it
                    if held_rows > self._max_rows:
                        overflow = True
                        break
        except LangfuseAnswerTooLarge:
            too_large = True
        except LangfuseHTTPError as error:
            if self._pages_of is None or error.status not in TOO_LONG or len(roots) == 1:
                raise
            too_long = True
        if too_long:
            # The request line (a later page's, with its cursor, may be the one) was too long for the
            # server: fewer ids a read from now on; what is not handed on yet is read again in those.
            self.id_reads.refused(len(roots))
            held.clear()
            async for trace in self._scan_group(list(pending.values()), excluded):
                yield trace
            return
        if self._pages_of is not None and not (too_long or overflow or oversized or too_large):
            self.id_reads.read(len(roots), rows_read)
        if too_large:
            # A page too large even at one row, not marked (legacy pages): which trace holds that row is
            # unknown, so each trace not handed on yet is read on its own; only the one holding it is skipped.
            held.clear()
            for root in list(pending.values()):
                yield await self._fetch_one(root)
            return
        if oversized and pending:
            held.clear()
            async for trace in self._scan(list(pending.values()), (*excluded, *oversized)):
                yield trace
            return
        if not overflow:
            for trace_id in list(pending):
                yield TraceRows(trace_id, sort_observations(list(held.pop(trace_id, {}).values())))
            return
        held.clear()
        self.splits += 1
        for half in _halves(list(pending.values())):
            async for trace in self._scan(half, excluded):
                yield trace

    def _around(
        self, roots: list[TraceRoot], excluded: tuple[TimeWindow, ...]
    ) -> tuple[list[TraceRoot], list[list[TraceRoot]]]:
        """The roots whose own span overlaps an excluded one (each read on its own), and the others in
        groups lying between the same two excluded spans (each group's window is clipped to them)."""
        if not excluded:
            return [], [roots]
        inside: list[TraceRoot] = []
        groups: dict[int, list[TraceRoot]] = {}
        for root in roots:
            span = self.core_span(root)
            if any(span.start < e.end and e.start < span.end for e in excluded):
                inside.append(root)
            else:
                groups.setdefault(sum(e.end <= span.start for e in excluded), []).append(root)
        return inside, [groups[key] for key in sorted(groups, reverse=True)]  # newest first, as rows come


def _halves(roots: list[TraceRoot]) -> tuple[list[TraceRoot], list[TraceRoot]]:
    """Split by the middle of the start times; by count when they all start at once."""
    roots.sort(key=lambda r: r.start_time)
    middle = roots[0].start_time + (roots[-1].start_time - roots[0].start_time) / 2
    early = [r for r in roots if r.start_time < middle]
    late = [r for r in roots if r.start_time >= middle]
    if not early or not late:
        cut = len(roots) // 2
        early, late = roots[:cut], roots[cut:]
    return early, late

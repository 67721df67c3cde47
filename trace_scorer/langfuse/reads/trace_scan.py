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
(``pages_of``), at most :data:`MAX_IDS_PER_SCAN` ids a request (longer lists are scanned in halves): a
few traces of a live stream then cost the pages of their own rows, not of every trace that ran beside
them within the slack (issue #29: ~30 pages a tick at 10 traces/s with the 5-minute slack).

A row the page source could read only without its input and output (marked :data:`TOO_LARGE_ROW`: alone
over ``max_answer_bytes``) skips its trace (``answer too large``) and the scan goes on. A source that
cannot do that raises :class:`LangfuseAnswerTooLarge`: then each trace still pending is read on its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime, timedelta

from trace_scorer.data.rows import replaces
from trace_scorer.extract.rows import Observation, sort_observations, started
from trace_scorer.langfuse.errors import LangfuseAnswerTooLarge
from trace_scorer.langfuse.types import Row, TimeWindow, TraceRoot, TraceRows

PageSource = Callable[[TimeWindow], AsyncGenerator[list[Row], None]]
#: A page source that also keeps to these traces' rows (the ids) within the window.
IdPageSource = Callable[[TimeWindow, Sequence[str]], AsyncGenerator[list[Row], None]]
FetchOne = Callable[[TraceRoot], Awaitable[TraceRows]]

#: The reasons an oversized trace is skipped for (the ``reason`` of ``traces_skipped_total``): more rows than
#: ``max_rows_per_trace``, or a row that does not fit in an answer of ``max_answer_bytes``.
TOO_MANY_ROWS = "too many observations"
ANSWER_TOO_LARGE = "answer too large"
#: The key a page source adds to a row it could only read without its input and output (the row alone was
#: over ``max_answer_bytes``): the value is that cap. The row's trace is skipped; reading goes on past it.
TOO_LARGE_ROW = "_answerTooLarge"
#: Trace ids in one id-filtered scan: ~40 characters each once URL-encoded, so a request line stays
#: under 8 KB (nginx's default buffer for it, in front of many self-hosted servers).
MAX_IDS_PER_SCAN = 150


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
    ) -> None:
        self._pages = pages
        self._pages_of = pages_of
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
        if self._pages_of is not None and len(roots) > MAX_IDS_PER_SCAN:
            for half in _halves(roots):
                async for trace in self._scan_group(half, excluded):
                    yield trace
            return
        pending = {r.trace_id: r for r in roots}
        held: dict[str, dict[str, Observation]] = {}
        held_rows = 0
        overflow = False
        oversized: list[TimeWindow] = []
        too_large = False
        try:
            window = self.clipped_window(roots, excluded)
            source = self._pages(window) if self._pages_of is None else self._pages_of(window, list(pending))
            async with aclosing(source) as pages:
                async for page in pages:
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

"""Production traces: score the new traces of a target since its watermark.

Each tick reads the window ``[watermark, min(now - lag, watermark + max_window))``. A trace is ready when
its root ended at least ``quiet_period`` ago (Langfuse has no "trace finished" signal); a root that never
ended is taken ``unfinished_after`` its start. Traces already in the ledger with this configuration are
not scored again; traces with a recorded failure are left to the retry path (their back-off is kept).
The watermark moves only after every batch of the window has settled.

Langfuse v4 shows a root only once it *ended* (spans are exported by OpenTelemetry at their end), so a
trace that runs longer than ``lag`` appears after the window holding its start was read. On v4 every tick
therefore also reads ``max_trace_duration`` behind the window again, and the ledger drops what was done:
a finished trace is scored exactly once whatever its duration (up to ``max_trace_duration``). A visible
root not finished yet keeps the watermark within that distance of its start, so it is read again. On
legacy servers (a trace is visible from its start) nothing is read again and such a root holds the
watermark at its start.

**Fresh listings on v4** (issue #29). A root is visible only once it ended, so on v4 a tick lists roots up
to *now* (not ``now - lag``): a trace is scored ``quiet_period`` after its end, as soon as a tick sees it.
Listing everything behind the watermark again every tick would cost a page per 1,000 roots of the last
``max_trace_duration``, so, after this process's first complete listing, a tick lists only the roots that
ended since the previous listing minus a margin (``endTime >=``): the margin is the quiet period, at least
:data:`FRESH_MARGIN`, widened to 1.5 times the latest a root was seen to appear (capped at ``lag``). Once
every ``lag`` the listing reaches ``lag`` before the previous sweep: any root visible within ``lag`` of its
end is listed then, however late. The times are in memory only: after a restart the first tick lists the
whole window again, as before, and the ledger drops what was done. A listing cut by ``max_window_traces``,
stopped or failed moves neither time.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.extract import extract_sample
from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import TimeWindow, TraceFilter, TraceRoot, trace_root_from_row
from trace_scorer.langfuse.http.clock import CLOCK_TOLERANCE_SECONDS
from trace_scorer.langfuse.reads.trace_scan import MAX_IDS_PER_SCAN, TOO_MANY_ROWS, IdReads, OversizedTrace
from trace_scorer.worker.batch import WorkItem
from trace_scorer.worker.late_rows import LateRows
from trace_scorer.worker.source import SourceBase
from trace_scorer.worker.tick import Tick, TickReport

log = structlog.get_logger(__name__)

#: Batches of one window in flight at once: the next batch is read and starts scoring while the previous
#: one finishes its slowest traces and posts, so the judge's slots do not run dry at every batch boundary.
#: Each batch keeps the ledger rules on its own; the watermark still waits for all of them.
BATCHES_IN_FLIGHT = 2

#: Seconds before the previous listing that the next one reaches back to at least (v4): rows become
#: visible some seconds after their span ended, and a root that ended just before a listing may come after it.
FRESH_MARGIN = 30.0
#: How much wider than the latest a root was seen to appear the fresh listing's margin is kept.
LATE_FACTOR = 1.5


def sampled(trace_id: str, rate: float) -> bool:
    """Deterministic sampling: the same traces are chosen on every run and by every replica."""
    if rate >= 1.0:
        return True
    bucket = int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:8], "big") / 2**64
    return bucket < rate


def trace_filter(target: TargetSettings, settings: Settings) -> TraceFilter:
    """The target's filter; the judge's own tracing environment is always excluded (never score a judge)."""
    f = target.filter
    excluded = tuple(dict.fromkeys([*f.exclude_environments, settings.judge.tracing_environment]))
    return TraceFilter(
        environments=tuple(f.environments),
        exclude_environments=excluded,
        trace_name=f.trace_name,
        tags=tuple(f.tags),
        user_id=f.user_id,
        metadata=dict(f.metadata),
    )


#: The reason a trace with one field over ``[langfuse] max_field_chars`` is skipped for.
FIELD_TOO_LARGE = "field too large"
#: The reason a trace none of whose observations matches ``[targets.observations]`` is recorded as done for.
NOTHING_MATCHED = "no matching observation"
#: The fields of an observation row that hold what the agent logged, of any size (metadata values are cut
#: at 200 characters by Langfuse unless expanded).
LOGGED_FIELDS = ("input", "output")


def too_large_field(observations: Sequence[Observation], limit: int) -> str | None:
    """``"<observation id>.<field>"`` of the first text field longer than ``limit`` (0: no limit), else None.
    v4 rows carry input and output as raw strings; a parsed value (legacy rows) is bounded by the answer's
    own cap and not measured (measuring it would mean encoding every row again)."""
    if limit <= 0:
        return None
    for observation in observations:
        row = observation.row
        for name in LOGGED_FIELDS:
            value = row.get(name)
            if isinstance(value, str) and len(value) > limit:
                return f"{row.get('id')}.{name}"
    return None


def retry_payload(root: TraceRoot) -> str:
    """What a retry needs to read the trace again: its root row, as JSON (made only for a failed trace)."""
    return json.dumps(root.row, default=str)


def _first_error(tasks: Iterable[asyncio.Task[None]]) -> BaseException | None:
    """The first failed task's error. Every task's exception is retrieved, so asyncio never logs "Task
    exception was never retrieved" when several batches failed at once."""
    errors = [t.exception() for t in tasks if not t.cancelled()]
    return next((e for e in errors if e is not None), None)


@dataclass(frozen=True)
class WindowPlan:
    """What one window holds to score, and how far the watermark may move once all of it has settled."""

    window: TimeWindow
    todo: list[TraceRoot]
    hold: datetime
    #: False when the listing stopped at ``max_window_traces`` before the end of what it was to read.
    complete: bool = True


def chunks(items: Sequence[TraceRoot], size: int) -> Iterable[Sequence[TraceRoot]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class ReadGroup:
    """Traces read together (v4: one ``traceId any of`` read): new ones, and scored ones read again for
    late children (``recheck``: scored again only if their rows changed)."""

    roots: Sequence[TraceRoot]
    recheck: frozenset[str] = frozenset()


class TraceSource(SourceBase):
    """The ``traces`` source of one target."""

    def prepare(self, settings: Settings) -> None:
        self.filter = trace_filter(self.target, settings)
        self.max_field_chars = settings.langfuse.max_field_chars
        #: v4: when this process's last complete listing and last sweep were made (server time); None:
        #: none yet, so the next listing reads the whole window (module docstring, "Fresh listings").
        self.listed_at: datetime | None = None
        self.swept_at: datetime | None = None
        #: Where this process left the watermark: one found behind it was moved back (by a person, or a
        #: state import), and the window is listed whole again.
        self.left_at: datetime | None = None
        #: The latest a root was seen to appear after a listing that came after its end (seconds).
        self.late_seen = 0.0
        #: v4: traces scored before a late child could be visible, to be read again (late_rows).
        self.late_rows = LateRows()

    async def tick(self, now: datetime, stop: asyncio.Event) -> TickReport:
        tick = self.start_tick(self.present(now), stop)
        now, report = tick.now, tick.report
        self.scorer.record_unrecorded()  # what was posted but not recorded first: its traces are done
        await self.retry_failures(tick)
        window = self.next_window(now, report)
        fresh = self.late_rows.enabled = self.client.reads.rows_appear_at_end
        if window is None:
            await self.recheck_late_rows(tick)
            return report
        if self.left_at is not None and window.start < self.left_at:
            self.listed_at = self.swept_at = None  # the watermark was moved back: list the window whole again
        ended_since, sweep = self.ended_since(now) if fresh else (None, False)
        plan = await self.plan_window(
            window, tick, reread=self.reread(), ended_since=ended_since, upto=now if fresh else None
        )
        self._learn_lateness(plan.todo)
        # v4: the re-checks due ride in the new traces' reads (the room their last read leaves), the rest
        # in reads of their own or, part-filling one, at a later tick (recheck_late_rows).
        groups = self.read_groups(plan.todo, tick) if fresh else None
        if not await self._score_batches(plan.todo, tick, groups=groups):
            return report
        if plan.hold > window.start:
            self.state.set_watermark(self.target.name, plan.hold)
        self.left_at = max(plan.hold, window.start)
        if fresh and plan.complete:
            self.listed_at = now
            if sweep:
                self.swept_at = now
        await self.recheck_late_rows(tick)
        return report

    def ended_since(self, now: datetime) -> tuple[datetime | None, bool]:
        """How far back (by end time) this tick lists roots on v4, and whether it is a sweep. None: the
        whole window (no complete listing yet in this process)."""
        if self.listed_at is None:
            return None, True
        lag = self.target.lag
        since = self.listed_at - timedelta(seconds=max(self.margin(), self.target.quiet_period))
        if self.swept_at is None or now - self.swept_at >= timedelta(seconds=lag):
            swept = self.swept_at or self.listed_at
            return min(since, swept - timedelta(seconds=lag)), True
        return since, False

    def margin(self) -> float:
        """Seconds after its end within which a row is sure to be read (v4): how far back a fresh listing
        reaches, and how long after its root's end a scored trace is read again for late children."""
        late = max(self.late_seen, self.late_rows.late_seen)
        return min(max(self.target.quiet_period, FRESH_MARGIN, LATE_FACTOR * late), max(self.target.lag, 0.0))

    async def recheck_late_rows(self, tick: Tick) -> None:
        """Read again the traces scored before a late child could be visible; score again (the same score
        ids: an overwrite) those whose rows changed (:mod:`trace_scorer.worker.late_rows`): in full reads,
        and in one that is not full once a trace in it waited :data:`~trace_scorer.worker.late_rows.RECHECK_WAIT`."""
        for group in self.read_groups((), tick):
            if tick.stop.is_set():
                return
            await self.score_roots(group.roots, tick, recheck=group.recheck)

    def id_reads(self) -> IdReads | None:
        """How many traces one id-filtered read holds (v4's trace scanner), or None (count by
        :data:`MAX_IDS_PER_SCAN`)."""
        return self.client.reads.id_reads

    def read_groups(self, todo: Sequence[TraceRoot], tick: Tick) -> list[ReadGroup]:
        """``todo`` (new traces) and the re-checks due, in batches of whole reads (as many traces as one
        ``traceId any of`` read holds, as many reads as fit in ``batch_size``): the new traces first, the
        re-checks, earliest due first, filling the room they leave. A last read of re-checks alone that is
        not full waits for the next tick's reads, unless one of them has waited ``RECHECK_WAIT``."""
        due = self.late_rows.ready(tick.now) if self.late_rows.enabled else []
        if due:
            failed = self.state.failed_subjects(self.target.name, [r.trace_id for r in due])
            self.late_rows.forget(list(failed))  # the retry path reads those again anyway
            fresh = {r.trace_id for r in todo}
            due = [r for r in due if r.trace_id not in failed and r.trace_id not in fresh]
        recheck = frozenset(r.trace_id for r in due)
        work = [*todo, *due]
        # A source reading only some rows of its traces scans windows (no id filter): batches as before.
        id_reads = None if self.row_conditions() else self.id_reads()
        cap = self.batch_size if self.row_conditions() else min(self.batch_size, MAX_IDS_PER_SCAN)
        groups: list[ReadGroup] = []
        start = 0
        while start < len(work):
            rest = work[start:]
            size = min(id_reads.fitting([r.trace_id for r in rest]), self.batch_size) if id_reads else cap
            full = size <= len(rest) - 1 or (id_reads is None and len(rest) == size)
            size = min(size, len(rest))
            roots = rest[:size]
            ids = frozenset(r.trace_id for r in roots) & recheck
            if len(ids) == len(roots) and not full and not self.late_rows.waited_out(roots, tick.now):
                break  # re-checks alone, part-filling a read: they wait for the next tick's
            groups.append(ReadGroup(roots, ids))
            start += size
        # Whole reads merged into batches of up to ``batch_size``: a batch's scores are posted in full
        # requests (``score_batch_size``), the last one part-full; more, smaller batches would post more.
        batches: list[ReadGroup] = []
        for group in groups:
            if batches and len(batches[-1].roots) + len(group.roots) <= self.batch_size:
                batches[-1] = ReadGroup([*batches[-1].roots, *group.roots], batches[-1].recheck | group.recheck)
            else:
                batches.append(group)
        return batches

    def _learn_lateness(self, todo: Sequence[TraceRoot]) -> None:
        """A new root that had ended before the previous listing was not visible then: it came that late.
        (A root held back by the quiet period counts too, by less than the quiet period: no harm.)"""
        if self.listed_at is None:
            return
        ends = [r.end_time for r in todo if r.end_time is not None and r.end_time < self.listed_at]
        if ends:
            late = (self.listed_at - min(ends)).total_seconds()
            if late > self.late_seen:
                self.late_seen = late
                log.info("langfuse_rows_late", target=self.target.name, seconds=round(late, 1))

    def next_window(self, now: datetime, report: TickReport) -> TimeWindow | None:
        """``[watermark, min(now - lag, watermark + max_window))``, or None when nothing is new yet.

        A watermark ahead of ``now`` (beyond the clocks' tolerance) cannot have come from a read (a window
        is never read past the server's time): it was stored by a clock that was wrong, so it is read from
        ``lookback`` again, as for a new target, and the ledger drops what was done."""
        lookback_start = now - timedelta(seconds=self.target.effective_lookback)
        start = self.state.watermark(self.target.name) or lookback_start
        if start > now + timedelta(seconds=CLOCK_TOLERANCE_SECONDS):
            log.warning(
                "watermark_ahead_of_clock",
                target=self.target.name,
                watermark=start.isoformat(),
                now=now.isoformat(),
                action="read again from lookback",
            )
            start = lookback_start
        end = min(now - timedelta(seconds=self.target.lag), start + timedelta(seconds=self.target.max_window))
        if end <= start:
            report.window = f"{start.isoformat()} (nothing new yet)"
            return None
        report.window = f"{start.isoformat()}/{end.isoformat()}"
        return TimeWindow(start, end)

    def reread(self) -> timedelta:
        """How far behind the window's start to read again: ``max_trace_duration`` where roots appear
        only when they end (v4), nothing where they appear at their start (legacy)."""
        if self.client.reads.rows_appear_at_end:
            return timedelta(seconds=self.target.max_trace_duration)
        return timedelta(0)

    async def score_window(
        self, window: TimeWindow, tick: Tick, *, reread: timedelta = timedelta(0)
    ) -> datetime | None:
        """Score what is ready in ``window`` (and in ``reread`` before it: traces that ended since they
        were last read); return how far the watermark may move (None: stopped early)."""
        plan = await self.plan_window(window, tick, reread=reread)
        if not await self._score_batches(plan.todo, tick):
            return None
        return plan.hold

    async def plan_window(
        self,
        window: TimeWindow,
        tick: Tick,
        *,
        reread: timedelta = timedelta(0),
        ended_since: datetime | None = None,
        upto: datetime | None = None,
    ) -> WindowPlan:
        """What is to be scored in ``window``: the ready traces not scored with this configuration and not
        left to the retry path, and how far the watermark may move once they have settled. ``upto``: list
        roots starting until then (v4: now), not only until the window's end; ``ended_since``: only roots
        that ended then or later."""
        ready, hold, complete = await self._ready_roots(window, tick, reread, ended_since, upto)
        known = self.state.scored_hashes(self.target.name, [r.trace_id for r in ready])
        failed = self.state.failed_subjects(self.target.name, [r.trace_id for r in ready])
        config_hash = tick.plan.config_hash
        todo = [r for r in ready if known.get(r.trace_id) != config_hash and r.trace_id not in failed]
        if self.listed_at is None and self.late_rows.enabled:  # scored before this process: rows not known
            done = [r for r in ready if known.get(r.trace_id) == config_hash]
            self.late_rows.scored_before(done, tick.now, self.margin())
        # Traces read again behind the window are expected to be known: not worth a skip count.
        if already := sum(1 for r in ready if known.get(r.trace_id) == config_hash and r.start_time >= window.start):
            tick.report.skipped["already scored"] += already
        tick.telemetry.backlog(self.target.name, len(todo))
        return WindowPlan(window, todo, hold, complete)

    async def _score_batches(
        self, todo: Sequence[TraceRoot], tick: Tick, *, groups: Sequence[ReadGroup] | None = None
    ) -> bool:
        """Score ``todo`` batch by batch (``batch_size`` each, or ``groups``: the batches as made by
        :meth:`read_groups`), :data:`BATCHES_IN_FLIGHT` at a time. False: stopped before the end.

        A batch that fails (Langfuse unavailable) starts no further batch; those in flight finish (their
        scores posted, their ledger entries recorded), then the first error is raised."""
        running: set[asyncio.Task[None]] = set()
        error: BaseException | None = None
        stopped = False
        try:
            batches = groups if groups is not None else [ReadGroup(batch) for batch in chunks(todo, self.batch_size)]
            for batch in batches:
                if tick.stop.is_set():
                    stopped = True
                    break
                running.add(asyncio.create_task(self.score_roots(batch.roots, tick, recheck=batch.recheck)))
                if len(running) >= BATCHES_IN_FLIGHT:
                    done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    error = _first_error(done)
                    if error is not None:
                        break
            if running:
                done, running = await asyncio.wait(running)
                later = _first_error(done)  # retrieved even when an earlier batch already failed
                error = error or later
        finally:
            for task in running:  # only when the tick itself is cancelled
                task.cancel()
        if error is not None:
            raise error
        return not stopped

    async def _ready_roots(
        self,
        window: TimeWindow,
        tick: Tick,
        reread: timedelta,
        ended_since: datetime | None = None,
        upto: datetime | None = None,
    ) -> tuple[list[TraceRoot], datetime, bool]:
        """The finished roots of ``window`` (and of ``reread`` before it, and until ``upto``), how far the
        watermark may move — a root not finished yet must be read again, so the watermark stays within
        ``reread`` of its start (at its start when nothing is read again) —, and whether the listing was
        complete (not cut by ``max_window_traces``)."""
        now, report = tick.now, tick.report
        quiet_since = now - timedelta(seconds=self.target.quiet_period)
        give_up_waiting = now - timedelta(seconds=self.target.unfinished_after)
        ready: dict[str, TraceRoot] = {}
        read = TimeWindow(window.start - reread, max(upto or window.end, window.end))

        def done_behind(roots: Sequence[TraceRoot]) -> set[str]:
            """Behind the window, only what is not scored yet is news (e.g. a long trace that just ended);
            a failed trace is the retry path's. Neither is held, nor counts towards ``max_window_traces``.
            The same holds for a root that ended before this process's previous listing: listed again
            within the fresh listing's margin, it was seen then."""
            self.late_rows.listed(roots)  # a late second root of a trace waiting for its re-check
            seen_before = self.listed_at if ended_since is not None else None
            behind = [
                r.trace_id
                for r in roots
                if r.start_time < window.start
                or (seen_before is not None and r.end_time is not None and r.end_time < seen_before)
            ]
            if not behind:
                return set()
            scored = self.state.scored_hashes(self.target.name, behind)
            done = {t for t, h in scored.items() if h == tick.plan.config_hash}
            return done | set(self.state.failed_subjects(self.target.name, behind))

        # Each page read is progress (the transport reports it to the tick's listener), even one with no root.
        listing = await self.client.reads.list_roots(
            read, self.filter, max_traces=self.target.max_window_traces, known=done_behind, ended_since=ended_since
        )
        # Cut by count: the window ends where the listing stopped, and the next one starts there.
        complete = listing.complete_until >= read.end
        hold = min(listing.complete_until, window.end)
        if hold < window.end:
            log.info("window_cut", target=self.target.name, traces=len(listing.roots), until=hold.isoformat())
        for root in listing.roots:
            if root.trace_id in ready:
                continue
            report.seen += 1
            tick.telemetry.traces_seen(self.target.name)
            if not sampled(root.trace_id, self.target.sample_rate):
                report.skipped["sampled out"] += 1
                continue
            unfinished = root.end_time is None and root.start_time > give_up_waiting
            if unfinished or (root.end_time is not None and root.end_time > quiet_since):
                report.deferred += 1
                hold = min(hold, root.start_time + reread)
                continue
            ready[root.trace_id] = root
        return list(ready.values()), hold, complete

    async def score_roots(
        self,
        roots: Sequence[TraceRoot],
        tick: Tick,
        *,
        recheck: frozenset[str] = frozenset(),
    ) -> None:
        """Fetch, score, post and record these traces (one batch): each trace is scored as soon as it is
        read, while the rest of the batch is still being read. Each page read counts as progress (the
        transport reports it): a scan may read many pages before it hands on a trace. ``recheck``: the
        traces of the batch read again for late children (scored again only if their rows changed); once
        the batch is done they are not waited on any longer (a batch that failed leaves them waiting)."""
        await self.scorer.run(self._work_items(roots, tick, recheck), tick)
        if recheck:
            self.late_rows.forget(list(recheck))

    async def _work_items(
        self,
        roots: Sequence[TraceRoot],
        tick: Tick,
        recheck: frozenset[str] = frozenset(),
    ) -> AsyncGenerator[WorkItem, None]:
        """The batch's traces as samples, in the order they are read; once all are read, the ones with
        nothing to score (oversized, no observations) are recorded as done, so they are not read again.
        Traces read again (``recheck``: scored again if their rows changed) are already done: those not
        scored again, or not found, are left as they are."""
        by_id = {r.trace_id: r for r in roots}
        found: set[str] = set()
        #: Traces yielded for scoring or set aside as oversized: the rest of the batch had nothing to read.
        handled: set[str] = set()
        #: Traces skipped for their size, by reason.
        oversized: dict[str, list[str]] = {}
        only = self.row_conditions()
        reads = self.client.reads
        async for trace in reads.fetch_traces(roots, only=only) if only else reads.fetch_traces(roots):
            self.scorer.progress()
            if trace.trace_id in found:
                continue
            found.add(trace.trace_id)
            root = by_id[trace.trace_id]
            if trace.trace_id in recheck and (isinstance(trace, OversizedTrace) or not self.late_rows.changed(trace)):
                handled.add(trace.trace_id)
                continue
            if isinstance(trace, OversizedTrace):
                # Recorded as done below, so logged once: not read again (until the configuration changes).
                cap = "max_rows_per_trace" if trace.reason == TOO_MANY_ROWS else "max_answer_bytes"
                log.warning(
                    "trace_skipped",
                    target=self.target.name,
                    trace_id=trace.trace_id,
                    reason=trace.reason,
                    rows_read=trace.rows_read,
                    **{cap: trace.limit},
                )
                oversized.setdefault(trace.reason, []).append(trace.trace_id)
                handled.add(trace.trace_id)
                continue
            if not trace.observations:
                continue
            if (field := too_large_field(trace.observations, self.max_field_chars)) is not None:
                log.warning(
                    "trace_skipped",
                    target=self.target.name,
                    trace_id=trace.trace_id,
                    reason=FIELD_TOO_LARGE,
                    field=field,
                    max_field_chars=self.max_field_chars,
                )
                oversized.setdefault(FIELD_TOO_LARGE, []).append(trace.trace_id)
                handled.add(trace.trace_id)
                continue
            handled.add(trace.trace_id)
            items = self.work_items(trace.observations, root)
            if not items:
                oversized.setdefault(NOTHING_MATCHED, []).append(trace.trace_id)
            elif self.late_rows.enabled:
                self.late_rows.scored(root, trace.observations, tick.now, self.margin())
            for item in items:
                if root.end_time is None:
                    item.sample.notes.append("the trace had not ended; scored as it was after `unfinished_after`")
                yield item
        config_hash = tick.plan.config_hash
        for reason, trace_ids in oversized.items():
            tick.report.skipped[reason] += len(trace_ids)
            self.state.record_scored(self.target.name, trace_ids, config_hash, tick.now, reason=reason)
        missing = [t for t in by_id if t not in handled and t not in recheck]
        if missing:
            # Deleted or not readable (yet): nothing to score. Recorded as done so they are not read again.
            tick.report.skipped["no observations"] += len(missing)
            self.state.record_scored(self.target.name, missing, config_hash, tick.now)

    def row_conditions(self) -> Sequence[dict[str, Any]]:
        """v4 ``filter`` conditions narrowing a trace's rows to what its samples need: none, whole traces."""
        return ()

    def work_items(self, observations: Sequence[Observation], root: TraceRoot) -> list[WorkItem]:
        """What one read trace is scored as: one sample (the observation scope overrides this)."""
        sample = extract_sample(observations, references=self.target.references, trace_id=root.trace_id)
        return [WorkItem(sample, root.start_time, root.environment, functools.partial(retry_payload, root))]

    async def retry_failures(self, tick: Tick) -> None:
        """Score again the failed traces whose next try has come."""
        roots = self.due_retries(tick.now)
        if roots and not tick.stop.is_set():
            log.info("retrying_failed_traces", target=self.target.name, traces=len(roots))
            await self.score_roots(roots, tick)

    def due_retries(self, now: datetime) -> list[TraceRoot]:
        """The roots of failed traces whose next try has come (one batch at most); a failure whose root
        cannot be read back is given up, logged."""
        roots = []
        for failure in self.state.due_failures(self.target.name, now, limit=self.batch_size):
            try:
                roots.append(trace_root_from_row(json.loads(failure.payload or "null")))
            except (TypeError, ValueError, KeyError) as exc:
                log.error("retry_unreadable", target=self.target.name, trace_id=failure.subject, error=str(exc))
                self.state.record_failure(self.target.name, failure.subject, f"cannot retry: {exc}", None)
        return roots

"""Sessions (``scope = "session"``): the traces that share a ``sessionId``, in the order they started,
scored as one sample (the whole conversation; extraction: :func:`extract_session`).

The window is read as the traces source reads it (:class:`TraceSource`: watermark, ``lag``, v4's
re-read behind the window, ``max_window_traces``); each trace listed names its session. A session is
ready once none of its traces started or ended for ``session_quiet`` (:func:`session_is_quiet`); only
then are all of its traces read — their roots with the target's filter and the session's id (one listing:
v4 ``GET /v2/observations?sessionId=…&isRootObservation=true``, legacy ``GET /traces?sessionId=…``),
their bodies by the traces source's reads (a window scan over many traces).

The ledger holds every trace of a scored session with the configuration hash, and the session's id: a
session is to score when a trace of it listed in a window is not in the ledger with this configuration
— a session that grew after it was scored has such a trace, so it is scored again, with the same score
ids (an overwrite). A session not quiet yet holds the watermark at its newest trace listed (so that
trace is listed again), as a trace not finished holds it at its start; the ledger keeps a re-read from
posting twice; failures are kept (and retried) by the session's id.

Where the scores go (decided from the server's version, ``ServerCapabilities.session_scores``): on the
session (``sessionId``, no ``traceId``) where the server takes that (3.x, 4.x); on 2.x, which refuses a
score without ``traceId``, on the session's *first* trace, with the session id in the score's metadata.
The first trace, not the last: it does not change as the session grows, so a re-score overwrites the
same score on the same trace (the id is the session's on every version, :func:`.ids.score_id`), where a
score moved to a new last trace would leave the old one behind (Langfuse keeps a stored score's
``traceId``).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from trace_scorer.config.settings import Settings
from trace_scorer.extract import extract_session
from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import ScoreSubject, TimeWindow, TraceRoot, trace_root_from_row
from trace_scorer.langfuse.reads.trace_scan import OversizedTrace, over_cap
from trace_scorer.worker.batch import WorkItem
from trace_scorer.worker.tick import Tick, TickReport
from trace_scorer.worker.traces import FIELD_TOO_LARGE, TraceSource, sampled, too_large_field

log = structlog.get_logger(__name__)

#: The reason a listed trace without a ``sessionId`` is recorded as done by a session target.
NO_SESSION = "no session"
#: The reason a session whose traces hold more rows than ``[langfuse] max_rows_per_session`` is skipped for.
SESSION_TOO_LARGE = "session too large"


@dataclass(frozen=True)
class Session:
    """A session ready to score: its id and every trace of it read, oldest first."""

    session_id: str
    roots: list[TraceRoot]


def _retry_payload(session: Session) -> str:
    """What a retry needs to read the session again: its id and its traces' root rows, as JSON (made only
    for a failed session)."""
    return json.dumps({"session_id": session.session_id, "roots": [r.row for r in session.roots]}, default=str)


def last_activity(roots: Sequence[TraceRoot]) -> datetime:
    """When the session last did something: the latest start or end of its traces."""
    return max(max(r.start_time, r.end_time or r.start_time) for r in roots)


def session_is_quiet(roots: Sequence[TraceRoot], now: datetime, *, quiet: float, unfinished_after: float) -> bool:
    """No trace of the session started or ended within ``quiet`` seconds before ``now``, and none is
    still running (a root without an end younger than ``unfinished_after`` seconds)."""
    give_up_waiting = now - timedelta(seconds=unfinished_after)
    if any(r.end_time is None and r.start_time > give_up_waiting for r in roots):
        return False
    return last_activity(roots) <= now - timedelta(seconds=quiet)


class SessionSource(TraceSource):
    """The ``traces`` source of a target with ``scope = "session"``."""

    def prepare(self, settings: Settings) -> None:
        super().prepare(settings)
        self.max_rows_per_session = settings.langfuse.max_rows_per_session

    async def tick(self, now: datetime, stop: asyncio.Event) -> TickReport:
        tick = self.start_tick(self.present(now), stop)
        report = tick.report
        self.scorer.record_unrecorded()
        await self.retry_sessions(tick)
        window = self.next_window(tick.now, report)
        if window is None:
            return report
        hold = await self.score_window(window, tick)
        if hold is not None and hold > window.start:
            self.state.set_watermark(self.target.name, hold)
        return report

    async def score_window(
        self, window: TimeWindow, tick: Tick, *, reread: timedelta = timedelta(0)
    ) -> datetime | None:
        """Score the sessions ready among those with a trace in ``window`` (and in the re-read before it,
        always the source's own: ``reread`` is the traces source's); return how far the watermark may
        move (None: stopped early). ``backfill`` calls it window by window."""
        todo, hold = await self.plan_sessions(window, tick)
        tick.telemetry.backlog(self.target.name, len(todo))
        for start in range(0, len(todo), self.batch_size):
            if tick.stop.is_set():
                return None
            await self.score_sessions(todo[start : start + self.batch_size], tick)
        return hold

    async def plan_sessions(self, window: TimeWindow, tick: Tick) -> tuple[list[Session], datetime]:
        """The sessions to score now, and how far the watermark may move once they have settled."""
        now, report = tick.now, tick.report
        reread = self.reread()
        config_hash = tick.plan.config_hash

        def done_behind(roots: Sequence[TraceRoot]) -> set[str]:
            behind = [r.trace_id for r in roots if r.start_time < window.start]
            if not behind:
                return set()
            return {t for t, h in self.state.scored_hashes(self.target.name, behind).items() if h == config_hash}

        listing = await self.client.reads.list_roots(
            TimeWindow(window.start - reread, window.end),
            self.filter,
            max_traces=self.target.max_window_traces,
            known=done_behind,
        )
        hold = listing.complete_until
        groups: dict[str, list[TraceRoot]] = {}
        lone: list[str] = []
        for root in listing.roots:
            report.seen += 1
            tick.telemetry.traces_seen(self.target.name)
            if not root.session_id:
                lone.append(root.trace_id)
            elif not sampled(root.session_id, self.target.sample_rate):
                report.skipped["sampled out"] += 1
            else:
                groups.setdefault(root.session_id, []).append(root)
        known = self.state.scored_hashes(self.target.name, [r.trace_id for rs in groups.values() for r in rs])
        lone_known = self.state.scored_hashes(self.target.name, lone)
        lone = [t for t in lone if lone_known.get(t) != config_hash]
        if lone:
            report.skipped[NO_SESSION] += len(lone)
            self.state.record_scored(self.target.name, lone, config_hash, now, reason=NO_SESSION)
        failed = self.state.failed_subjects(self.target.name, groups)

        def quiet(roots: Sequence[TraceRoot]) -> bool:
            return session_is_quiet(
                roots, now, quiet=self.target.session_quiet, unfinished_after=self.target.unfinished_after
            )

        todo: list[Session] = []
        for session_id, listed in groups.items():
            if session_id in failed:
                continue  # the retry path's
            if all(known.get(r.trace_id) == config_hash for r in listed):
                if any(r.start_time >= window.start for r in listed):
                    report.unit_skipped["already scored"] += 1
                continue
            newest = max(r.start_time for r in listed)
            if quiet(listed):
                roots = await self.session_roots(session_id, listed, now)
                if quiet(roots):
                    todo.append(Session(session_id, roots))
                    continue
            report.deferred += 1
            hold = min(hold, newest + reread)
        return todo, hold

    async def session_roots(self, session_id: str, listed: Sequence[TraceRoot], now: datetime) -> list[TraceRoot]:
        """Every trace of the session, oldest first: one listing with the target's filter and the session's
        id over ``max_session_duration`` before the first trace listed, up to now (conditions a server
        ignores are re-checked by ``root_matches``), merged with the traces listed."""
        start = min(r.start_time for r in listed) - timedelta(seconds=self.target.max_session_duration)
        end = max(now, max(r.start_time for r in listed)) + timedelta(milliseconds=1)
        found = await self.client.reads.list_roots(TimeWindow(start, end), replace(self.filter, session_id=session_id))
        roots = {r.trace_id: r for r in listed}
        roots.update({r.trace_id: r for r in found.roots})
        return sorted(roots.values(), key=lambda r: (r.start_time, r.trace_id))

    async def score_sessions(self, sessions: Sequence[Session], tick: Tick) -> None:
        """Fetch, score, post and record these sessions (one batch)."""
        await self.scorer.run(self._session_items(sessions, tick), tick)

    def subject(self, session: Session) -> ScoreSubject:
        """The session itself where the server takes session scores, else its first trace (2.x)."""
        if self.client.capabilities.session_scores:
            return ScoreSubject.session(session.session_id)
        return ScoreSubject.session(session.session_id, on_trace=session.roots[0].trace_id)

    async def _session_items(self, sessions: Sequence[Session], tick: Tick) -> AsyncGenerator[WorkItem, None]:
        """Each session as one sample once all of its traces are read; a session with a trace over a
        cap is recorded as done without scores (its reason), as such a trace is by the traces source."""
        of_trace = {r.trace_id: s.session_id for s in sessions for r in s.roots}
        rows: dict[str, dict[str, list[Observation]]] = {s.session_id: {} for s in sessions}
        held = dict.fromkeys(rows, 0)  # rows held per session: capped at max_rows_per_session
        skipped: dict[str, str] = {}
        pending = {s.session_id: {r.trace_id for r in s.roots} for s in sessions}
        by_id = {s.session_id: s for s in sessions}
        roots = [r for s in sessions for r in s.roots]
        async for trace in self.client.reads.fetch_traces(roots):
            self.scorer.progress()
            session_id = of_trace.get(trace.trace_id)
            if session_id is None or trace.trace_id not in pending[session_id]:
                continue
            pending[session_id].discard(trace.trace_id)
            if session_id in skipped:
                pass  # its rows are not held: the session will not be scored
            elif isinstance(trace, OversizedTrace):
                skipped[session_id] = trace.reason
            elif (field := too_large_field(trace.observations, self.max_field_chars)) is not None:
                log.warning("session_trace_skipped", target=self.target.name, trace_id=trace.trace_id, field=field)
                skipped[session_id] = FIELD_TOO_LARGE
            elif over_cap(held[session_id] + len(trace.observations), self.max_rows_per_session):
                log.warning(
                    "session_too_large",
                    target=self.target.name,
                    session_id=session_id,
                    rows_read=held[session_id] + len(trace.observations),
                    limit=self.max_rows_per_session,
                )
                skipped[session_id] = SESSION_TOO_LARGE
            else:
                rows[session_id][trace.trace_id] = trace.observations
                held[session_id] += len(trace.observations)
            if session_id in skipped:
                rows[session_id].clear()  # what was held of it is let go at once
            if pending[session_id]:
                continue
            session = by_id[session_id]
            ledger = (session_id, *(r.trace_id for r in session.roots))
            if session_id in skipped:
                reason = skipped[session_id]
                log.warning("session_skipped", target=self.target.name, session_id=session_id, reason=reason)
                tick.report.unit_skipped[reason] += 1
                self.state.record_scored(self.target.name, ledger, tick.plan.config_hash, tick.now, reason=reason)
                continue
            ordered = [row for r in session.roots for row in rows[session_id].get(r.trace_id, [])]
            sample = extract_session(ordered, session_id=session_id, references=self.target.references)
            first = session.roots[0]
            yield WorkItem(
                sample,
                first.start_time,
                first.environment,
                functools.partial(_retry_payload, session),
                scored=self.subject(session),
                ledger=ledger,
            )

    async def retry_sessions(self, tick: Tick) -> None:
        """Score again the failed sessions whose next try has come (their traces read again)."""
        now = tick.now
        sessions = []
        for failure in self.state.due_failures(self.target.name, now, limit=self.batch_size):
            try:
                payload = json.loads(failure.payload or "null")
                listed = [trace_root_from_row(row) for row in payload["roots"]]
                sessions.append(Session(failure.subject, await self.session_roots(failure.subject, listed, now)))
            except (TypeError, ValueError, KeyError) as exc:
                log.error("retry_unreadable", target=self.target.name, session_id=failure.subject, error=str(exc))
                self.state.record_failure(self.target.name, failure.subject, f"cannot retry: {exc}", None)
        if sessions and not tick.stop.is_set():
            log.info("retrying_failed_sessions", target=self.target.name, sessions=len(sessions))
            await self.score_sessions(sessions, tick)

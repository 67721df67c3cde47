"""Late children: a trace scored before all its rows were visible is read once more, and scored again if
its rows changed (issue #29).

On v4 a row is visible some seconds after its span ended, and a child now and then after its root: a trace
scored ``quiet_period`` after its root's end may miss a child. Langfuse offers no filter on when a row
arrived (the events table's filter columns have no ingestion or update time), so the only way to see a late
row is to read the trace again. Every trace scored less than a *horizon* after its root's end is remembered
(in memory: its root and a fingerprint of the rows it was scored from) and read again once the horizon has
passed, by trace id (``traceId any of``, the same read the first scoring used). The re-checks share a
tick's reads with its new traces: they fill the room the new traces leave in the tick's last read, and
fill reads of their own; what would only part-fill a read waits for the next tick's, up to
:data:`RECHECK_WAIT` (the worker, :mod:`trace_scorer.worker.traces`). A trace whose rows differ is scored
again from that read; its score ids are deterministic, so the new scores overwrite the old (never a
duplicate). A trace whose rows are the same costs nothing more.

The horizon is the fresh listing's margin (the quiet period, at least 30 s, 1.5 times the latest a row was
seen to come, at most ``lag``): a child visible within it of its root's end is scored, one later is not.
A late row found widens it (and the listing's margin). What is remembered lives in memory: after a restart
the first listing reads the whole window again, and the traces it finds done that ended within the horizon
are scored again once after it (what they were scored from is not known), an overwrite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import TraceRoot, TraceRows

log = structlog.get_logger(__name__)

#: Seconds the earliest due re-check may wait for others, so that re-checks share reads (with a tick's new
#: traces, or each other) when traffic is slow.
RECHECK_WAIT = 30.0


@dataclass(frozen=True, slots=True)
class Scored:
    """A trace scored before its horizon: its root, what its rows were, and when to read it again."""

    root: TraceRoot
    #: None: scored by an earlier process (its rows are not known here): scored again after the horizon.
    rows: frozenset[tuple[str, datetime | None]] | None
    scored_at: datetime
    due: datetime


def fingerprint(observations: Sequence[Observation]) -> frozenset[tuple[str, datetime | None]]:
    """What tells a trace's rows apart from a later read of them: each row's id and end time (a new row, or
    a row that ended since). A short string and a time a row, for the traces of one horizon only."""
    return frozenset((o.id, o.end) for o in observations)


class LateRows:
    """The traces of one target scored before their horizon, waiting to be read again."""

    def __init__(self) -> None:
        self._waiting: dict[str, Scored] = {}
        #: Set by a tick that reads traces again (v4); otherwise nothing is remembered (a fleet's tasks).
        self.enabled = False
        #: The latest a row was found to come after its trace was scored (seconds after the row's end).
        self.late_seen = 0.0

    def __len__(self) -> int:
        return len(self._waiting)

    def scored(self, root: TraceRoot, observations: Sequence[Observation], now: datetime, horizon: float) -> None:
        """``root``'s trace was scored from ``observations`` at ``now``: remember it if a row may still come."""
        if root.end_time is None:
            return  # scored after `unfinished_after`: its rows are whatever came by then
        due = root.end_time + timedelta(seconds=horizon)
        if now < due:
            self._waiting[root.trace_id] = Scored(root, fingerprint(observations), now, due)

    def scored_before(self, roots: Sequence[TraceRoot], now: datetime, horizon: float) -> None:
        """These traces were scored before this process started (the ledger says so; not what from): those
        within the horizon of their end are scored again after it, once — an overwrite."""
        for root in roots:
            if root.end_time is not None and now < (due := root.end_time + timedelta(seconds=horizon)):
                self._waiting.setdefault(root.trace_id, Scored(root, None, now, due))

    def listed(self, roots: Sequence[TraceRoot]) -> None:
        """Root rows a listing showed: a root of a waiting trace that it was not scored with (a trace's
        second root, come late) makes its re-check read the trace's roots too (whose rows then changed);
        otherwise a re-check reads only the children of a trace whose roots the listing read."""
        for root in roots:
            scored = self._waiting.get(root.trace_id)
            if scored is None or (listed := scored.root.listed_roots) is None:
                continue
            if all(row.get("id") != root.observation_id for row in listed):
                self._waiting[root.trace_id] = replace(scored, root=replace(scored.root, listed_roots=None))

    def ready(self, now: datetime) -> list[TraceRoot]:
        """All the traces whose horizon has passed, the earliest first: a tick's reads take what they have
        room for (:meth:`waited_out` says when the rest may not wait for the next tick's)."""
        ready = sorted((s for s in self._waiting.values() if s.due <= now), key=lambda s: s.due)
        return [s.root for s in ready]

    def waited_out(self, roots: Sequence[TraceRoot], now: datetime) -> bool:
        """Whether one of these traces' horizon passed :data:`RECHECK_WAIT` ago or more: they are read now,
        whether or not they fill a read."""
        limit = now - timedelta(seconds=RECHECK_WAIT)
        return any((s := self._waiting.get(r.trace_id)) is not None and s.due <= limit for r in roots)

    def changed(self, trace: TraceRows) -> bool:
        """Whether ``trace`` (read again) differs from what it was scored from; it is not waited on any longer."""
        scored = self._waiting.pop(trace.trace_id, None)
        if scored is None:
            return False
        if scored.rows is None:
            return True
        new = fingerprint(trace.observations) - scored.rows
        if not new:
            return False
        # A new row that had ended before the trace was scored was not visible then: it came at least that late.
        ends = [end for _, end in new if end is not None and end < scored.scored_at]
        late = max(((scored.scored_at - end).total_seconds() for end in ends), default=0.0)
        self.late_seen = max(self.late_seen, late)
        log.info(
            "late_rows_found", trace_id=trace.trace_id, rows=len(trace.observations), seconds_after_end=round(late, 1)
        )
        return True

    def forget(self, trace_ids: Sequence[str]) -> None:
        """These traces were read again (or could not be): not waited on any longer."""
        for trace_id in trace_ids:
            self._waiting.pop(trace_id, None)

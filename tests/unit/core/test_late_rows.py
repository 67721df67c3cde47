"""Which scored traces are read again for late children, and when (worker/late_rows.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import TraceRoot, TraceRows
from trace_scorer.langfuse.reads.trace_scan import MAX_IDS_PER_SCAN
from trace_scorer.worker.late_rows import RECHECK_WAIT, LateRows

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
HORIZON = 30.0


def root(trace_id: str, end_ago: float | None) -> TraceRoot:
    end = None if end_ago is None else NOW - timedelta(seconds=end_ago)
    row: dict[str, Any] = {"id": f"o-{trace_id}", "traceId": trace_id}
    start = NOW - timedelta(seconds=100)
    return TraceRoot(trace_id, f"o-{trace_id}", "chat", start, end, "production", None, None, None, (), {}, row)


def rows(trace_id: str, *children: tuple[str, float]) -> list[Observation]:
    """The root row and children (id, seconds before NOW they ended), read as the adapter reads them."""
    out = [{"id": f"o-{trace_id}", "traceId": trace_id, "endTime": (NOW - timedelta(seconds=15)).isoformat()}]
    for child, ago in children:
        out.append({"id": child, "traceId": trace_id, "endTime": (NOW - timedelta(seconds=ago)).isoformat()})
    return [Observation.from_row(row, seq) for seq, row in enumerate(out)]


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def test_only_traces_scored_within_the_horizon_of_their_end_are_remembered() -> None:
    late = LateRows()
    late.scored(root("early", 15), rows("early"), NOW, HORIZON)
    late.scored(root("after", 45), rows("after"), NOW, HORIZON)  # all its rows had time to come
    late.scored(root("unfinished", None), rows("unfinished"), NOW, HORIZON)  # scored after `unfinished_after`
    assert len(late) == 1


def test_a_due_trace_waits_for_others_until_a_read_is_full_or_it_waited_long_enough() -> None:
    late = LateRows()
    late.scored(root("t", 15), rows("t"), NOW, HORIZON)
    assert late.due(later(14)) == []  # its horizon has not passed
    assert late.due(later(15 + RECHECK_WAIT - 1)) == []  # due, waiting for others to share the read
    assert [r.trace_id for r in late.due(later(15 + RECHECK_WAIT))] == ["t"]

    full = LateRows()
    for i in range(MAX_IDS_PER_SCAN):
        full.scored(root(f"t{i}", 15), rows(f"t{i}"), NOW, HORIZON)
    assert len(full.due(later(15))) == MAX_IDS_PER_SCAN  # a full read at once


def test_changed_when_a_row_came_or_ended_since_and_the_lateness_is_learned() -> None:
    late = LateRows()
    for trace_id in ("same", "new", "ended"):
        late.scored(root(trace_id, 15), rows(trace_id, ("c1", 20)), NOW, HORIZON)
    assert not late.changed(TraceRows("same", rows("same", ("c1", 20))))
    assert late.late_seen == 0.0
    # A child that had ended 25 s before the trace was scored was not visible then: at least 25 s late.
    assert late.changed(TraceRows("new", rows("new", ("c1", 20), ("c2", 25))))
    assert late.late_seen == 25.0
    assert late.changed(TraceRows("ended", rows("ended", ("c1", 10))))
    assert len(late) == 0  # each is read again once
    assert not late.changed(TraceRows("same", rows("same", ("c9", 20))))  # no longer waited on

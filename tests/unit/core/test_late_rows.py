"""Which scored traces are read again for late children, and when (worker/late_rows.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import TraceRoot, TraceRows
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


def test_a_due_trace_is_ready_once_its_horizon_passed_and_has_waited_out_after_recheck_wait() -> None:
    late = LateRows()
    late.scored(root("t", 15), rows("t"), NOW, HORIZON)
    late.scored(root("u", 10), rows("u"), NOW, HORIZON)
    assert late.ready(later(14)) == []  # no horizon has passed
    assert [r.trace_id for r in late.ready(later(20))] == ["t", "u"]  # the earliest due first
    ready = late.ready(later(15 + RECHECK_WAIT - 1))
    assert not late.waited_out(ready, later(15 + RECHECK_WAIT - 1))  # may wait for others to share a read
    assert late.waited_out(ready, later(15 + RECHECK_WAIT))
    assert not late.waited_out(ready[1:], later(15 + RECHECK_WAIT))  # "u" was due 5 s later


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

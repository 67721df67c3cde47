"""Observation rows: de-duplication, and the v3 → v4 row conversion (one input format for extraction).

Until ClickHouse merges, one observation can come back as several rows, within a page or across a page
boundary. Duplicates of one observation share its ``startTime`` (immutable in Langfuse), and v4 sorts
rows by ``startTime`` descending, so duplicates are adjacent in the stream: holding back only the rows
of the current ``startTime`` is enough to de-duplicate a stream without holding the whole window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from trace_scorer.langfuse.ids import format_timestamp, parse_timestamp
from trace_scorer.langfuse.types import Row, TraceRoot


def row_time(row: Mapping[str, Any], key: str) -> datetime | None:
    value = row.get(key)
    if isinstance(value, str) and value:
        return parse_timestamp(value)
    return None


def row_start(row: Mapping[str, Any]) -> datetime:
    start = row_time(row, "startTime")
    if start is None:
        raise ValueError(f"observation {row.get('id')!r} has no startTime")
    return start


def _updated(row: Mapping[str, Any]) -> datetime:
    return row_time(row, "updatedAt") or datetime.min.replace(tzinfo=row_start(row).tzinfo)


def newer(a: Row, b: Row) -> Row:
    """The more recently updated of two rows of one observation (the later one on a tie)."""
    return a if _updated(a) > _updated(b) else b


def dedupe(rows: Iterable[Row]) -> list[Row]:
    """Rows with unique ids, each the newest by ``updatedAt``; first-seen order kept."""
    by_id: dict[str, Row] = {}
    for row in rows:
        key = row["id"]
        by_id[key] = newer(by_id[key], row) if key in by_id else row
    return list(by_id.values())


class StreamDeduper:
    """De-duplicates a stream of rows sorted by ``startTime`` descending (see the module docstring)."""

    def __init__(self) -> None:
        self._held: dict[str, Row] = {}
        self._held_start: datetime | None = None
        self.duplicates = 0

    def push(self, rows: Iterable[Row]) -> list[Row]:
        """Take a page; return the rows that can no longer have a duplicate coming."""
        out: list[Row] = []
        for row in rows:
            start = row_start(row)
            if self._held_start is not None and start != self._held_start:
                out.extend(self._held.values())
                self._held = {}
            self._held_start = start
            key = row["id"]
            if key in self._held:
                self.duplicates += 1
                self._held[key] = newer(self._held[key], row)
            else:
                self._held[key] = row
        return out

    def flush(self) -> list[Row]:
        out = list(self._held.values())
        self._held = {}
        self._held_start = None
        return out


def trace_root_from_row(row: Row) -> TraceRoot:
    """The typed view of a root row (v4, or a v3 trace converted by :func:`v3_trace_root_row`)."""
    metadata = row.get("metadata")
    tags = row.get("tags")
    return TraceRoot(
        trace_id=str(row["traceId"]),
        observation_id=str(row["id"]),
        name=row.get("traceName") or row.get("name"),
        start_time=row_start(row),
        end_time=row_time(row, "endTime"),
        environment=row.get("environment"),
        updated_at=row_time(row, "updatedAt"),
        user_id=row.get("userId"),
        session_id=row.get("sessionId"),
        tags=tuple(tags) if isinstance(tags, list) else (),
        metadata=metadata if isinstance(metadata, dict) else {},
        row=row,
    )


def sort_rows(rows: list[Row]) -> list[Row]:
    """Oldest first (ties by id): the order in which the agent did things."""
    return sorted(rows, key=lambda r: (row_start(r), str(r["id"])))


# --- v3 → v4 rows -------------------------------------------------------------------------------


def raw_io(value: Any) -> str | None:
    """Input/output as v4 returns it: strings as they are, anything else as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def v3_trace_root_row(trace: Mapping[str, Any]) -> Row:
    """A v3 trace as the root row Langfuse v4 itself makes of a legacy trace: a SPAN ``t-<traceId>``.

    v3 traces have no end time; ``timestamp + latency`` (seconds, from the ``metrics`` fields) stands
    in for it. Without a latency (or ``-1``: metrics not requested) the end time is unknown (None).
    """
    trace_id = str(trace["id"])
    start = parse_timestamp(str(trace["timestamp"]))
    latency = trace.get("latency")
    end: str | None = None
    if isinstance(latency, int | float) and latency >= 0:
        end = format_timestamp(start + timedelta(seconds=float(latency)))
    metadata = trace.get("metadata")
    row: Row = {
        "id": f"t-{trace_id}",
        "traceId": trace_id,
        "type": "SPAN",
        "name": trace.get("name"),
        "startTime": trace["timestamp"],
        "endTime": end,
        "parentObservationId": None,
        "isRootObservation": True,
        "environment": trace.get("environment"),
        "userId": trace.get("userId"),
        "sessionId": trace.get("sessionId"),
        "version": trace.get("version"),
        "release": trace.get("release"),
        "tags": list(trace.get("tags") or []),
        "traceName": trace.get("name"),
        "input": raw_io(trace.get("input")),
        "output": raw_io(trace.get("output")),
        "metadata": metadata
        if isinstance(metadata, dict)
        else ({} if metadata is None else {"value": metadata}),
        "level": "DEFAULT",
    }
    for key in ("createdAt", "updatedAt", "projectId"):
        if key in trace:
            row[key] = trace[key]
    return row


#: Fields of a v3 observation that keep their name and meaning in v4 rows.
_V3_SAME = (
    "id",
    "traceId",
    "type",
    "name",
    "startTime",
    "endTime",
    "completionStartTime",
    "parentObservationId",
    "level",
    "statusMessage",
    "version",
    "environment",
    "model",
    "modelParameters",
    "usageDetails",
    "costDetails",
    "promptId",
    "promptName",
    "promptVersion",
    "latency",
    "timeToFirstToken",
    "createdAt",
    "updatedAt",
    "projectId",
)


def v3_observation_row(observation: Mapping[str, Any]) -> Row:
    """A v3 observation (``ObservationsView``) as a v4 row: same names, input/output as raw strings."""
    row: Row = {key: observation[key] for key in _V3_SAME if key in observation}
    row["isRootObservation"] = False
    row["input"] = raw_io(observation.get("input"))
    row["output"] = raw_io(observation.get("output"))
    metadata = observation.get("metadata")
    row["metadata"] = (
        metadata if isinstance(metadata, dict) else ({} if metadata is None else {"value": metadata})
    )
    return row


def v3_trace_rows(trace: Mapping[str, Any]) -> list[Row]:
    """A v3 trace with its observations (``/traces/{id}``) as v4 rows: synthetic root first."""
    rows = [v3_trace_root_row(trace)]
    rows.extend(v3_observation_row(o) for o in trace.get("observations") or () if isinstance(o, Mapping))
    return rows

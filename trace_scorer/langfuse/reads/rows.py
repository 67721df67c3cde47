"""Observation rows: the typed root and the v3 → v4 row conversion (one input format for extraction).
Stream de-duplication (``StreamDeduper``) and row times live in :mod:`trace_scorer.data.rows`, shared with
extraction, and are re-exported here; a trace's rows are read into records by
:meth:`~trace_scorer.langfuse.types.TraceRows.read`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from trace_scorer.data.rows import StreamDeduper, row_start, row_time
from trace_scorer.data.times import parse_timestamp
from trace_scorer.langfuse.types import Row, TraceRoot
from trace_scorer.langfuse.writes.ids import format_timestamp

__all__ = [
    "StreamDeduper",
    "raw_io",
    "row_start",
    "row_time",
    "trace_root_from_row",
    "v3_observation_row",
    "v3_trace_root_row",
    "v3_trace_rows",
]


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
    usage = observation.get("usage")
    if "usageDetails" not in row and isinstance(usage, Mapping):  # 2.x: token counts under ``usage`` only
        row["usageDetails"] = {k: n for k in ("input", "output", "total") if isinstance(n := usage.get(k), int) and n}
    cost = observation.get("calculatedTotalCost")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        row["totalCost"] = cost
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

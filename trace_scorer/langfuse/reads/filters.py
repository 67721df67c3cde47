"""A :class:`TraceFilter` and a time window as query parameters, for each API generation.

Simple query parameters are used where they exist. Conditions that have none (excluded environments,
trace name on v4, tags on v4, metadata) need the structured ``filter`` JSON — and when ``filter`` is
present Langfuse lets it take precedence over the simple parameters, so it then carries *every*
condition (window included); the simple parameters are still sent, consistent with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from trace_scorer.langfuse.http.transport import QueryValue
from trace_scorer.langfuse.types import TimeWindow, TraceFilter, TraceRoot
from trace_scorer.langfuse.writes.ids import format_timestamp


def _needs_json_v4(trace_filter: TraceFilter) -> bool:
    return bool(
        trace_filter.exclude_environments or trace_filter.trace_name or trace_filter.tags or trace_filter.metadata
    )


def _window_conditions(window: TimeWindow) -> list[dict[str, Any]]:
    return [
        {"type": "datetime", "column": "startTime", "operator": ">=", "value": format_timestamp(window.start)},
        {"type": "datetime", "column": "startTime", "operator": "<", "value": format_timestamp(window.end)},
    ]


def v4_trace_rows_query(window: TimeWindow, trace_ids: Sequence[str], *, children_only: bool = False) -> dict[str, Any]:
    """Arguments for the observations of these traces starting in ``window`` (``traceId any of``);
    ``children_only``: without their root rows (``isRootObservation = false``: the listing read them)."""
    conditions = [
        *_window_conditions(window),
        {"type": "stringOptions", "column": "traceId", "operator": "any of", "value": list(trace_ids)},
    ]
    if children_only:
        conditions.append({"type": "boolean", "column": "isRootObservation", "operator": "=", "value": False})
    return {
        "from_start_time": window.start,
        "to_start_time": window.end,
        # Compact: a read holds as many ids as its URL has room for (a byte an id more).
        "filter": json.dumps(conditions, ensure_ascii=False, separators=(",", ":")),
    }


def v4_root_query(
    window: TimeWindow, trace_filter: TraceFilter, *, ended_since: datetime | None = None
) -> dict[str, Any]:
    """Arguments of ``observations.get_many`` for the root observations of matching traces; with
    ``ended_since``, only the roots that ended then or later (issue #29: what is new since a listing)."""
    query: dict[str, Any] = {
        "is_root_observation": True,
        "from_start_time": window.start,
        "to_start_time": window.end,
        "environment": list(trace_filter.environments) or None,
        "user_id": trace_filter.user_id,
        "session_id": trace_filter.session_id,
    }
    if _needs_json_v4(trace_filter) or ended_since is not None:
        conditions: list[dict[str, Any]] = [
            *_window_conditions(window),
            {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True},
        ]
        if ended_since is not None:
            conditions.append(
                {"type": "datetime", "column": "endTime", "operator": ">=", "value": format_timestamp(ended_since)}
            )
        conditions += _common_conditions(trace_filter, trace_name_column="traceName")
        query["filter"] = json.dumps(conditions, ensure_ascii=False)
    return query


def v3_traces_query(window: TimeWindow, trace_filter: TraceFilter) -> dict[str, QueryValue]:
    """Query parameters of ``GET /api/public/traces`` for matching traces in the window."""
    query: dict[str, QueryValue] = {
        "fromTimestamp": format_timestamp(window.start),
        "toTimestamp": format_timestamp(window.end),
        "name": trace_filter.trace_name,
        "userId": trace_filter.user_id,
        "sessionId": trace_filter.session_id,
        "tags": list(trace_filter.tags) or None,
        "environment": list(trace_filter.environments) or None,
    }
    if trace_filter.exclude_environments or trace_filter.metadata:
        conditions: list[dict[str, Any]] = [
            {
                "type": "datetime",
                "column": "timestamp",
                "operator": ">=",
                "value": format_timestamp(window.start),
            },
            {
                "type": "datetime",
                "column": "timestamp",
                "operator": "<",
                "value": format_timestamp(window.end),
            },
        ]
        conditions += _common_conditions(trace_filter, trace_name_column="name")
        query["filter"] = json.dumps(conditions, ensure_ascii=False)
    return query


def _common_conditions(trace_filter: TraceFilter, *, trace_name_column: str) -> list[dict[str, Any]]:
    conditions: list[dict[str, Any]] = []
    if trace_filter.environments:
        conditions.append(
            {
                "type": "stringOptions",
                "column": "environment",
                "operator": "any of",
                "value": list(trace_filter.environments),
            }
        )
    if trace_filter.exclude_environments:
        conditions.append(
            {
                "type": "stringOptions",
                "column": "environment",
                "operator": "none of",
                "value": list(trace_filter.exclude_environments),
            }
        )
    if trace_filter.trace_name:
        conditions.append(
            {"type": "string", "column": trace_name_column, "operator": "=", "value": trace_filter.trace_name}
        )
    if trace_filter.tags:
        conditions.append(
            {"type": "arrayOptions", "column": "tags", "operator": "all of", "value": list(trace_filter.tags)}
        )
    if trace_filter.user_id:
        conditions.append({"type": "string", "column": "userId", "operator": "=", "value": trace_filter.user_id})
    if trace_filter.session_id:
        conditions.append({"type": "string", "column": "sessionId", "operator": "=", "value": trace_filter.session_id})
    for key, value in sorted(trace_filter.metadata.items()):
        conditions.append({"type": "stringObject", "column": "metadata", "key": key, "operator": "=", "value": value})
    return conditions


def metadata_value(metadata: Mapping[str, Any], key: str) -> Any:
    """``key`` (dotted for nested values) in root metadata of any shape Langfuse returns: flattened
    (``{"a.b": 1}``, v4), nested (``{"a": {"b": 1}}``), or nested as JSON text (``{"a": "{\\"b\\": 1}"}``).
    None when absent."""
    if key in metadata:
        return metadata[key]
    head, dot, rest = key.partition(".")
    while dot:
        value = metadata.get(head)
        if isinstance(value, str) and value[:1] == "{":
            try:
                value = json.loads(value)
            except (ValueError, RecursionError):
                value = None
        if isinstance(value, Mapping):
            found = metadata_value(value, rest)
            if found is not None:
                return found
        step, dot, rest = rest.partition(".")
        head = f"{head}.{step}"
    return None


def as_text(value: Any) -> str | None:
    """A metadata value as Langfuse's string comparison sees it (leaves are stored as text)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def root_matches(root: TraceRoot, trace_filter: TraceFilter) -> bool:
    """Every condition of ``trace_filter`` holds for ``root``, checked on our side too.

    Servers may ignore conditions they do not know (``filter`` before v3.116.1; environment and metadata
    on 2.x): a trace that should have been excluded must still not be scored.
    """
    f = trace_filter
    environment = root.environment or "default"
    if f.environments and environment not in f.environments:
        return False
    if environment in f.exclude_environments:
        return False
    if f.trace_name and root.name is not None and root.name != f.trace_name:
        return False
    if f.tags and not set(f.tags) <= set(root.tags):
        return False
    if f.user_id and root.user_id != f.user_id:
        return False
    if f.session_id and root.session_id != f.session_id:
        return False
    return all(as_text(metadata_value(root.metadata, k)) == v for k, v in f.metadata.items())

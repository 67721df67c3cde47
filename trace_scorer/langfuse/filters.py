"""A :class:`TraceFilter` and a time window as query parameters, for each API generation.

Simple query parameters are used where they exist. Conditions that have none (excluded environments,
trace name on v4, tags on v4, metadata) need the structured ``filter`` JSON — and when ``filter`` is
present Langfuse lets it take precedence over the simple parameters, so it then carries *every*
condition (window included); the simple parameters are still sent, consistent with it.
"""

from __future__ import annotations

import json
from typing import Any

from trace_scorer.langfuse.ids import format_timestamp
from trace_scorer.langfuse.transport import QueryValue
from trace_scorer.langfuse.types import TimeWindow, TraceFilter


def _needs_json_v4(trace_filter: TraceFilter) -> bool:
    return bool(
        trace_filter.exclude_environments
        or trace_filter.trace_name
        or trace_filter.tags
        or trace_filter.metadata
    )


def v4_root_query(window: TimeWindow, trace_filter: TraceFilter) -> dict[str, Any]:
    """Arguments of ``observations.get_many`` for the root observations of matching traces."""
    query: dict[str, Any] = {
        "is_root_observation": True,
        "from_start_time": window.start,
        "to_start_time": window.end,
        "environment": list(trace_filter.environments) or None,
        "user_id": trace_filter.user_id,
    }
    if _needs_json_v4(trace_filter):
        conditions: list[dict[str, Any]] = [
            {
                "type": "datetime",
                "column": "startTime",
                "operator": ">=",
                "value": format_timestamp(window.start),
            },
            {
                "type": "datetime",
                "column": "startTime",
                "operator": "<",
                "value": format_timestamp(window.end),
            },
            {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True},
        ]
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
        conditions.append(
            {"type": "string", "column": "userId", "operator": "=", "value": trace_filter.user_id}
        )
    for key, value in sorted(trace_filter.metadata.items()):
        conditions.append(
            {"type": "stringObject", "column": "metadata", "key": key, "operator": "=", "value": value}
        )
    return conditions

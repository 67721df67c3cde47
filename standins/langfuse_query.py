"""Langfuse's query semantics, as plain functions over JSON rows: the stand-in's
(:mod:`standins.langfuse_server`), on loopback or in-process (:mod:`standins.inprocess`).

- v4 observation rows: field groups (absent, not null, when not requested), the simple query parameters,
  the structured ``filter`` (which, as Langfuse does, *replaces* a simple parameter on the same column),
  time windows ``[from, to)``.
- v3 traces: the list endpoint's parameters and ``filter``.
- experiments: start/end/item count computed *within the requested window*, newest activity first;
  experiment items and their field groups.

A query this module does not know raises :class:`UnsupportedQuery` (the stand-in answers it 400 and
records it; a test expects none).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

Params = Mapping[str, Sequence[str]]


class UnsupportedQuery(ValueError):
    """A parameter, filter column or operator the stand-ins do not implement."""


# --- small helpers -----------------------------------------------------------------------------------


def one(params: Params, name: str) -> str | None:
    values = params.get(name)
    return values[0] if values else None


def csv(params: Params, name: str) -> set[str]:
    """A comma-separated parameter as a set (empty: not given)."""
    return {item for value in params.get(name, ()) for item in value.split(",") if item}


def parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def in_window(value: str | None, start: datetime | None, end: datetime | None) -> bool:
    """``start <= value < end`` (open ends when None); a row without the time is outside any bound."""
    if value is None:
        return start is None and end is None
    moment = datetime.fromisoformat(value)
    return (start is None or moment >= start) and (end is None or moment < end)


def encode_offset_cursor(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_offset_cursor(cursor: str | None) -> int:
    return int(json.loads(base64.b64decode(cursor))["offset"]) if cursor else 0


# --- v4 observation field groups --------------------------------------------------------------------

FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name",
        "level",
        "statusMessage",
        "version",
        "environment",
        "bookmarked",
        "public",
        "userId",
        "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": (
        "model",
        "internalModelId",
        "modelParameters",
        "modelId",
        "inputPrice",
        "outputPrice",
        "totalPrice",
    ),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}
DEFAULT_FIELDS = "core,basic"


def field_keys(fields: str | None) -> frozenset[str]:
    groups = {"core", *(fields or DEFAULT_FIELDS).split(",")}
    unknown = groups - set(FIELD_GROUPS)
    if unknown:
        raise UnsupportedQuery(f"unknown field groups {sorted(unknown)}")
    return frozenset(key for group in groups for key in FIELD_GROUPS[group])


def project(row: Mapping[str, Any], fields: str | None) -> dict[str, Any]:
    """The row with only the requested groups' fields (others absent, as Langfuse leaves them out)."""
    keep = field_keys(fields)
    return {key: value for key, value in row.items() if key in keep}


# --- filter conditions --------------------------------------------------------------------------------

#: Simple query parameters of ``/v2/observations`` → the column they filter.
V4_SIMPLE_COLUMNS = {
    "fromStartTime": "startTime",
    "toStartTime": "startTime",
    "traceId": "traceId",
    "name": "name",
    "userId": "userId",
    "sessionId": "sessionId",
    "type": "type",
    "level": "level",
    "version": "version",
    "parentObservationId": "parentObservationId",
    "isRootObservation": "isRootObservation",
    "environment": "environment",
}

_ROW_COLUMNS = frozenset(
    {
        "id",
        "type",
        "name",
        "traceId",
        "startTime",
        "endTime",
        "environment",
        "level",
        "statusMessage",
        "version",
        "userId",
        "sessionId",
        "isRootObservation",
        "parentObservationId",
        "traceName",
        "model",
        "promptName",
        "promptVersion",
        "input",
        "output",
        "release",
        "timestamp",
        "latency",
        "timeToFirstToken",
        "totalCost",
    }
)
_USAGE = {"inputTokens": "input", "outputTokens": "output", "totalTokens": "total"}
_COST = {"inputCost": "input", "outputCost": "output"}


def _column(row: Mapping[str, Any], column: str, key: str | None) -> Any:
    if column in ("tags", "traceTags"):
        return row.get("tags") or []
    if column == "metadata":
        if not key:
            raise UnsupportedQuery("a metadata condition needs a key")
        metadata = row.get("metadata")
        return metadata.get(key) if isinstance(metadata, Mapping) else None
    if column in _USAGE:
        return (row.get("usageDetails") or {}).get(_USAGE[column])
    if column in _COST:
        return (row.get("costDetails") or {}).get(_COST[column])
    if column == "latency" and row.get("latency") is None and row.get("endTime") and row.get("startTime"):
        start, end = parse_time(row["startTime"]), parse_time(row["endTime"])
        return (end - start).total_seconds() if start and end else None
    if column in _ROW_COLUMNS:
        return row.get(column)
    raise UnsupportedQuery(f"filter column {column!r} is not known to the stand-in")


def _string(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _compare(operator: str, left: Any, right: Any) -> bool:
    if left is None:
        return False
    if operator == "=":
        return bool(left == right)
    if operator == ">":
        return bool(left > right)
    if operator == "<":
        return bool(left < right)
    if operator == ">=":
        return bool(left >= right)
    if operator == "<=":
        return bool(left <= right)
    raise UnsupportedQuery(f"comparison operator {operator!r}")


def _string_op(operator: str, value: str, wanted: str, *, case_sensitive: bool) -> bool:
    if not case_sensitive:
        value, wanted = value.casefold(), wanted.casefold()
    if operator == "=":
        return value == wanted
    if operator == "contains":
        return wanted in value
    if operator == "does not contain":
        return wanted not in value
    if operator == "starts with":
        return value.startswith(wanted)
    if operator == "ends with":
        return value.endswith(wanted)
    if operator == "matches":
        return wanted in value
    raise UnsupportedQuery(f"string operator {operator!r}")


def condition_holds(row: Mapping[str, Any], condition: Mapping[str, Any]) -> bool:
    """One structured filter condition on a row (v4 observation row or v3 trace)."""
    kind, column, operator = str(condition["type"]), str(condition["column"]), str(condition["operator"])
    wanted: Any = condition.get("value")
    value = _column(row, column, condition.get("key"))
    if kind == "datetime":
        moment = parse_time(value) if isinstance(value, str) else None
        bound = parse_time(wanted) if isinstance(wanted, str) else None
        if bound is None:
            raise UnsupportedQuery(f"datetime condition without a time: {condition}")
        return _compare(operator, moment, bound)
    if kind == "string":
        matches = operator == "matches"
        return _string_op(operator, _string(value), str(wanted), case_sensitive=not matches or column == "metadata")
    if kind in ("stringOptions", "categoryOptions"):
        if operator == "any of":
            return bool(value in wanted)
        if operator == "none of":
            return bool(value not in wanted)
        raise UnsupportedQuery(f"{kind} operator {operator!r}")
    if kind == "arrayOptions":
        have = set(value or [])
        if operator == "any of":
            return bool(have & set(wanted))
        if operator == "none of":
            return not have & set(wanted)
        if operator == "all of":
            return bool(set(wanted) <= have)
        raise UnsupportedQuery(f"arrayOptions operator {operator!r}")
    if kind == "number":
        return _compare(operator, value, wanted)
    if kind == "stringObject":
        if operator == "is set":
            return value is not None
        if operator == "is not set":
            return value is None
        if value is None:
            return operator == "does not contain"
        return _string_op(operator, _string(value), str(wanted), case_sensitive=True)
    if kind == "numberObject":
        try:
            number = float(value) if value is not None else None
        except (TypeError, ValueError):
            return False
        return _compare(operator, number, wanted)
    if kind == "boolean":
        if operator == "=":
            return bool(bool(value) == wanted)
        if operator == "<>":
            return bool(bool(value) != wanted)
        raise UnsupportedQuery(f"boolean operator {operator!r}")
    if kind == "null":
        if operator == "is null":
            return value is None
        if operator == "is not null":
            return value is not None
        raise UnsupportedQuery(f"null operator {operator!r}")
    raise UnsupportedQuery(f"filter type {kind!r}")


def parse_filter(params: Params) -> list[dict[str, Any]]:
    text = one(params, "filter")
    if not text:
        return []
    conditions = json.loads(text)
    if not isinstance(conditions, list):
        raise UnsupportedQuery("filter is not a JSON array")
    return conditions


def effective_simple_params(
    params: Params, conditions: Iterable[Mapping[str, Any]], columns: Mapping[str, str]
) -> dict[str, Sequence[str]]:
    """The simple parameters Langfuse still applies: those whose column the JSON filter does not touch."""
    touched = {c.get("column") for c in conditions}
    if "traceTags" in touched:
        touched.add("tags")
    return {name: values for name, values in params.items() if columns.get(name, name) not in touched}


def observation_matches(row: Mapping[str, Any], params: Params, conditions: list[dict[str, Any]] | None = None) -> bool:
    """Whether a v4 observation row answers ``/v2/observations`` with these parameters."""
    if conditions is None:
        conditions = parse_filter(params)
    simple = effective_simple_params(params, conditions, V4_SIMPLE_COLUMNS)
    start, end = parse_time(one(simple, "fromStartTime")), parse_time(one(simple, "toStartTime"))
    if (start is not None or end is not None) and not in_window(row.get("startTime"), start, end):
        return False
    for param in ("traceId", "name", "userId", "sessionId", "type", "level", "version"):
        if param in simple and row.get(param) != simple[param][0]:
            return False
    if "parentObservationId" in simple:
        wanted = simple["parentObservationId"][0] or None
        if row.get("parentObservationId") != wanted:
            return False
    root = one(simple, "isRootObservation")
    if root is not None and bool(row.get("isRootObservation")) != (root == "true"):
        return False
    if "environment" in simple and row.get("environment") not in simple["environment"]:
        return False
    return all(condition_holds(row, c) for c in conditions)


def wants_roots_only(params: Params, conditions: list[dict[str, Any]]) -> bool:
    """The query only matches root observations (the stand-in then needs only each trace's root row)."""
    for c in conditions:
        if c.get("column") == "isRootObservation" and c.get("type") == "boolean":
            return (c.get("operator") == "=" and c.get("value") is True) or (
                c.get("operator") == "<>" and c.get("value") is False
            )
    return one(params, "isRootObservation") == "true"


# --- v3 traces ----------------------------------------------------------------------------------------

V3_SIMPLE_COLUMNS = {
    "fromTimestamp": "timestamp",
    "toTimestamp": "timestamp",
    "name": "name",
    "userId": "userId",
    "sessionId": "sessionId",
    "tags": "tags",
    "environment": "environment",
    "version": "version",
    "release": "release",
}


def v3_trace_matches(trace: Mapping[str, Any], params: Params, conditions: list[dict[str, Any]] | None = None) -> bool:
    """Whether a v3 trace answers ``GET /api/public/traces`` with these parameters."""
    if conditions is None:
        conditions = parse_filter(params)
    simple = effective_simple_params(params, conditions, V3_SIMPLE_COLUMNS)
    start, end = parse_time(one(simple, "fromTimestamp")), parse_time(one(simple, "toTimestamp"))
    if (start is not None or end is not None) and not in_window(trace.get("timestamp"), start, end):
        return False
    for param in ("name", "userId", "sessionId", "version", "release"):
        if param in simple and trace.get(param) != simple[param][0]:
            return False
    if "tags" in simple and not set(simple["tags"]) <= set(trace.get("tags") or []):
        return False
    if "environment" in simple and trace.get("environment") not in simple["environment"]:
        return False
    return all(condition_holds(trace, c) for c in conditions)


def v3_order(params: Params) -> tuple[str, bool]:
    """``orderBy`` as (field, descending); Langfuse's default is ``timestamp.desc``."""
    order = one(params, "orderBy") or "timestamp.desc"
    field, _, direction = order.partition(".")
    if direction not in ("asc", "desc"):
        raise UnsupportedQuery(f"orderBy {order!r}")
    return field, direction == "desc"


# --- experiments ------------------------------------------------------------------------------------


def experiments_in_window(
    experiments: Iterable[Mapping[str, Any]],
    items: Iterable[Mapping[str, Any]],
    params: Params,
) -> list[dict[str, Any]]:
    """``GET /experiments``: experiments with items started in the window, start/end/count within it.

    Ordered by latest activity (end time) first. ``id``, ``name`` and ``datasetId`` are csv filters.
    """
    start, end = parse_time(one(params, "fromStartTime")), parse_time(one(params, "toStartTime"))
    dataset_ids, ids, names = csv(params, "datasetId"), csv(params, "id"), csv(params, "name")
    times: dict[str, list[datetime]] = {}
    for item in items:
        if in_window(item["startTime"], start, end):
            times.setdefault(item["experimentId"], []).append(datetime.fromisoformat(item["startTime"]))
    out = []
    for experiment in experiments:
        if dataset_ids and experiment.get("datasetId") not in dataset_ids:
            continue
        if (ids and experiment["id"] not in ids) or (names and experiment["name"] not in names):
            continue
        seen = times.get(experiment["id"])
        if not seen:
            continue
        seen.sort()
        out.append(
            {
                **experiment,
                "startTime": iso(seen[0]),
                "endTime": iso(seen[-1]),
                "itemCount": len(seen),
            }
        )
    out.sort(key=lambda e: e["endTime"], reverse=True)
    return out


def project_experiment(experiment: Mapping[str, Any], fields: str | None) -> dict[str, Any]:
    groups = set((fields or "core").split(","))
    drop = set()
    if "metadata" not in groups:
        drop.add("metadata")
    if "scores" not in groups:
        drop.add("scores")
    return {k: v for k, v in experiment.items() if k not in drop}


def experiment_items_matching(items: Iterable[Mapping[str, Any]], params: Params) -> list[Mapping[str, Any]]:
    """``GET /experiment-items``: items in the window and the csv filters, newest first."""
    start, end = parse_time(one(params, "fromStartTime")), parse_time(one(params, "toStartTime"))
    experiment_ids, names = csv(params, "experimentId"), csv(params, "experimentName")
    item_ids, dataset_ids = csv(params, "experimentItemId"), csv(params, "datasetId")
    rows = [
        i
        for i in items
        if (not experiment_ids or i["experimentId"] in experiment_ids)
        and (not names or i["experimentName"] in names)
        and (not item_ids or i["experimentItemId"] in item_ids)
        and (not dataset_ids or i.get("experimentDatasetId") in dataset_ids)
        and in_window(i["startTime"], start, end)
    ]
    rows.sort(key=lambda r: r["startTime"], reverse=True)
    return rows


def project_experiment_item(item: Mapping[str, Any], fields: str | None) -> dict[str, Any]:
    groups = set((fields or "core,dataset").split(","))
    drop = set()
    if "io" not in groups:
        drop |= {"input", "output", "expectedOutput"}
    if "metadata" not in groups:
        drop.add("metadata")
    if "itemMetadata" not in groups:
        drop.add("experimentItemMetadata")
    if "experimentMetadata" not in groups:
        drop |= {"experimentMetadata", "experimentDescription"}
    if "scores" not in groups:
        drop.add("scores")
    return {k: v for k, v in item.items() if k not in drop}


# --- v4 metadata (flattened) -----------------------------------------------------------------------


def _structure(value: Any) -> Any:
    """A stored metadata value as the SDK had it: a JSON-encoded object is the object again."""
    if isinstance(value, str) and value[:1] == "{":
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def _leaf_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError, TypeError):
        return str(value)


def flatten_metadata(metadata: Any) -> dict[str, str]:
    """Metadata as v4 stores it: nested objects flattened to dotted keys, every leaf a string
    (``flattenJsonToPathArrays``; ``{"a":{"b":1}}`` → ``{"a.b":"1"}``)."""
    if not isinstance(metadata, Mapping):
        return {}
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        value = _structure(value)
        if isinstance(value, Mapping) and value:
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        else:
            out[prefix] = _leaf_string(value)

    for key, value in metadata.items():
        walk(str(key), value)
    return out


def parse_json_prioritised(text: str) -> Any:
    """Langfuse's ``parseJsonPrioritised``: the JSON value of a string when it is JSON, else the string."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def observation_metadata(metadata: Any, *, truncate: int | None) -> dict[str, Any]:
    """v2 observations' ``metadata``: flattened, each leaf cut to ``truncate`` characters when given
    (the ``events_core`` path: encoded objects too), then JSON-parsed."""
    flat = flatten_metadata(metadata)
    if truncate is not None:
        flat = {k: v[:truncate] for k, v in flat.items()}
    return {k: parse_json_prioritised(v) for k, v in flat.items()}


def page_meta(page: int, limit: int, total: int) -> dict[str, int]:
    """``meta`` of a page/limit list (the legacy endpoints, score configs)."""
    return {"page": page, "limit": limit, "totalItems": total, "totalPages": -(-total // limit) if total else 0}


def iso(value: datetime) -> str:
    """Langfuse's time format: UTC, milliseconds, ``Z``."""
    utc = value.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"

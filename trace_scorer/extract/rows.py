"""Observation rows (``GET /api/public/v2/observations``) → de-duplicated observations in trace order.

Rows are camelCase dicts; ``input``/``output`` arrive as JSON strings (parsed here; a string that is
not JSON stays the string). Until ClickHouse merges, one observation can come back as several rows:
the newest ``updatedAt`` wins (on a tie, or without ``updatedAt``, the row read last: the rule of
:func:`trace_scorer.rows.replaces`, which the Langfuse adapter applies too). The tree is
rebuilt from ``parentObservationId`` and walked depth-first, siblings by ``startTime``: that order is
the order in which the agent did things.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trace_scorer.extract.model import Notes, short
from trace_scorer.rows import replaces
from trace_scorer.times import parse_time

__all__ = [
    "Observation",
    "dedupe_rows",
    "find_root",
    "parse_json_field",
    "to_observation",
    "trace_order",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class Observation:
    """One observation, its JSON fields parsed."""

    id: str
    trace_id: str | None
    parent_id: str | None
    type: str
    name: str | None
    start: datetime | None
    #: ``endTime``: None when absent or null; ``ended_known`` tells which.
    end: datetime | None
    ended_known: bool
    is_root_flag: bool
    level: str | None
    status_message: str | None
    environment: str | None
    input: Any
    output: Any
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The row as given (for fields read only from the root: tags, userId, sessionId...).
    row: Mapping[str, Any] = field(default_factory=dict)
    #: Position in the input rows (the last tie-breaker for ordering).
    seq: int = 0

    def label(self) -> str:
        """How notes name this observation: ``GENERATION 'OpenAI-generation' (id …)``."""
        name = f" {short(self.name, 40)!r}" if self.name else ""
        return f"{self.type or 'observation'}{name} ({self.id})"


def parse_json_field(value: Any) -> Any:
    """A JSON string parsed; a string that is not JSON as it is; anything else unchanged."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def dedupe_rows(rows: Iterable[Any], notes: Notes) -> list[Mapping[str, Any]]:
    """One row per observation id: the newest ``updatedAt``; rows without an id are kept as they are.
    Unlike :func:`trace_scorer.rows.dedupe`, tolerant of any row (the notes say what was skipped), and
    each kept row stays where its newest version was read."""
    kept: dict[str, tuple[int, Mapping[str, Any]]] = {}
    anonymous: list[tuple[int, Mapping[str, Any]]] = []
    skipped = 0
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            skipped += 1
            continue
        key = _text(row.get("id"))
        if key is None:
            anonymous.append((index, row))
            continue
        previous = kept.get(key)
        if previous is None or replaces(parse_time(row.get("updatedAt")), parse_time(previous[1].get("updatedAt"))):
            kept[key] = (index, row)
    if skipped:
        notes.add(f"{skipped} row(s) are not JSON objects; skipped")
    if anonymous:
        notes.add(f"{len(anonymous)} row(s) have no id; read without their place in the tree")
    ordered = sorted([*kept.values(), *anonymous], key=lambda pair: pair[0])
    return [row for _, row in ordered]


def to_observation(row: Mapping[str, Any], seq: int, notes: Notes) -> Observation:
    """One row → :class:`Observation`; fields of the wrong type are read as absent."""
    ident = _text(row.get("id")) or f"row-{seq}"
    metadata = parse_json_field(row.get("metadata"))
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        notes.add(f"observation {ident}: metadata is not an object; kept under '_raw'")
        metadata = {"_raw": metadata}
    elif not all(isinstance(key, str) for key in metadata):
        metadata = {str(key): value for key, value in metadata.items()}
    kind = row.get("type")
    start = parse_time(row.get("startTime"))
    if start is None and row.get("startTime") is not None:
        notes.add(f"observation {ident}: startTime {short(row.get('startTime'))} is not a time")
    return Observation(
        id=ident,
        trace_id=_text(row.get("traceId")),
        parent_id=_text(row.get("parentObservationId")) or None,
        type=kind.upper() if isinstance(kind, str) else "",
        name=row.get("name") if isinstance(row.get("name"), str) else None,
        start=start,
        end=parse_time(row.get("endTime")),
        ended_known="endTime" in row,
        is_root_flag=row.get("isRootObservation") is True,
        level=row.get("level") if isinstance(row.get("level"), str) else None,
        status_message=row.get("statusMessage") if isinstance(row.get("statusMessage"), str) else None,
        environment=row.get("environment") if isinstance(row.get("environment"), str) else None,
        input=parse_json_field(row.get("input")),
        output=parse_json_field(row.get("output")),
        metadata=metadata,
        row=row,
        seq=seq,
    )


def _sort_key(observation: Observation) -> tuple[bool, datetime, int]:
    return (observation.start is None, observation.start or _EPOCH, observation.seq)


def trace_order(observations: list[Observation], notes: Notes) -> list[Observation]:
    """Depth-first from the top-level observations, siblings by start time; never loops on a cycle."""
    by_id = {o.id: o for o in observations}
    children: dict[str, list[Observation]] = {}
    tops: list[Observation] = []
    orphans = 0
    for observation in observations:
        parent = observation.parent_id
        if parent is None or parent == observation.id:
            tops.append(observation)
        elif parent in by_id:
            children.setdefault(parent, []).append(observation)
        else:
            tops.append(observation)
            if not observation.is_root_flag:
                orphans += 1
    if orphans:
        notes.add(f"{orphans} observation(s) name a parent that is not in the rows (incomplete trace?)")
    ordered: list[Observation] = []
    seen: set[str] = set()
    stack = sorted(tops, key=_sort_key, reverse=True)
    while stack:
        current = stack.pop()
        if current.id in seen:
            continue
        seen.add(current.id)
        ordered.append(current)
        stack.extend(sorted(children.get(current.id, ()), key=_sort_key, reverse=True))
    if len(ordered) < len(observations):
        rest = sorted((o for o in observations if o.id not in seen), key=_sort_key)
        notes.add(f"{len(rest)} observation(s) form a parent cycle; read in start-time order")
        ordered.extend(rest)
    return ordered


def find_root(ordered: list[Observation]) -> Observation | None:
    """The trace's root: the observation marked ``isRootObservation``, else the only one without a
    parent; None when the trace has several top-level observations and none is marked."""
    flagged = [o for o in ordered if o.is_root_flag]
    if flagged:
        return min(flagged, key=lambda o: (o.parent_id is not None, *_sort_key(o)))
    tops = [o for o in ordered if o.parent_id is None]
    return tops[0] if len(tops) == 1 else None

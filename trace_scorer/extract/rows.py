"""Observation rows (``GET /api/public/v2/observations``) → de-duplicated observations in trace order.

A row is read once into a typed record (:class:`Observation`, by :meth:`Observation.from_row`): where the
Langfuse adapter reads it (``TraceRows``), or, for rows from a file, here. Rows are camelCase dicts;
``input``/``output`` arrive as JSON strings (parsed when first read; a string that is not JSON stays the
string). Until ClickHouse merges, one observation can come back as several rows:
the newest ``updatedAt`` wins (on a tie, or without ``updatedAt``, the row read last: the rule of
:func:`trace_scorer.data.rows.replaces`, which the Langfuse adapter applies too). The tree is
rebuilt from ``parentObservationId`` and walked depth-first, siblings by ``startTime``: that order is
the order in which the agent did things.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from trace_scorer.data import jsonbytes
from trace_scorer.data.rows import replaces
from trace_scorer.data.times import parse_time
from trace_scorer.extract.model import Notes, short

__all__ = [
    "Observation",
    "RowOrRecord",
    "dedupe_observations",
    "dedupe_rows",
    "deduped",
    "find_root",
    "observation_at",
    "parse_json_field",
    "raw_row",
    "sort_observations",
    "started",
    "take",
    "to_observation",
    "trace_order",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: An input/output not parsed yet (parsed when first read: a trace skipped for its size never is).
_UNREAD: Any = object()


@dataclass(slots=True)
class Observation:
    """One observation row, read once: ids, type and times typed, metadata an object, input and output
    parsed from JSON when first read. Fields of the wrong type are read as absent; what could not be read
    is in ``problems`` (the sample's notes). The Langfuse adapter makes these where it reads rows
    (:class:`~trace_scorer.langfuse.types.TraceRows`); extraction takes them as they are, and makes them
    from rows read from a file with the same constructor (:meth:`from_row`)."""

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
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The row as given (for fields read only from the root: tags, userId, sessionId...).
    row: Mapping[str, Any] = field(default_factory=dict)
    #: Position among the trace's records (the last tie-breaker for ordering).
    seq: int = 0
    #: What could not be read from the row, as the notes say it.
    problems: tuple[str, ...] = ()
    _input: Any = field(default=_UNREAD, repr=False, compare=False)
    _output: Any = field(default=_UNREAD, repr=False, compare=False)
    _updated: Any = field(default=_UNREAD, repr=False, compare=False)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], seq: int = 0) -> Observation:
        """The one constructor: a row as Langfuse returns it (or as exported to a file) → a record."""
        get = row.get  # every row of every trace comes through here: names looked up once
        ident = get("id")
        if type(ident) is not str:  # a string: the common case, without a call
            ident = _text(ident)
        ident = ident or f"row-{seq}"
        problems: list[str] = []
        metadata = get("metadata")
        if isinstance(metadata, str):
            metadata = parse_json_field(metadata)
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, dict):
            problems.append(f"observation {ident}: metadata is not an object; kept under '_raw'")
            metadata = {"_raw": metadata}
        elif metadata and not all(isinstance(key, str) for key in metadata):
            metadata = {str(key): value for key, value in metadata.items()}
        kind, raw_start, name = get("type"), get("startTime"), get("name")
        start = parse_time(raw_start)
        if start is None and raw_start is not None:
            problems.append(f"observation {ident}: startTime {short(raw_start)} is not a time")
        level, message, environment = get("level"), get("statusMessage"), get("environment")
        return cls(
            ident,
            _text(get("traceId")),
            _text(get("parentObservationId")) or None,
            kind.upper() if isinstance(kind, str) else "",
            name if isinstance(name, str) else None,
            start,
            parse_time(get("endTime")),
            "endTime" in row,
            get("isRootObservation") is True,
            level if isinstance(level, str) else None,
            message if isinstance(message, str) else None,
            environment if isinstance(environment, str) else None,
            metadata,
            row,
            seq,
            tuple(problems),
        )

    @property
    def input(self) -> Any:
        if self._input is _UNREAD:
            self._input = parse_json_field(self.row.get("input"))
        return self._input

    @property
    def output(self) -> Any:
        if self._output is _UNREAD:
            self._output = parse_json_field(self.row.get("output"))
        return self._output

    @property
    def updated_at(self) -> datetime | None:
        """``updatedAt``, parsed when first asked for: only duplicates of an observation need it."""
        if self._updated is _UNREAD:
            self._updated = parse_time(self.row.get("updatedAt"))
        updated: datetime | None = self._updated
        return updated

    def at(self, seq: int) -> Observation:
        """This record at another place in a list of records (a copy; the same record when it is there)."""
        return self if seq == self.seq else replace(self, seq=seq)

    def label(self) -> str:
        """How notes name this observation: ``GENERATION 'OpenAI-generation' (id …)``."""
        name = f" {short(self.name, 40)!r}" if self.name else ""
        return f"{self.type or 'observation'}{name} ({self.id})"


#: What ``json.loads`` skips before a value, and the characters a value it reads may start with.
_JSON_BLANKS = " \t\n\r"
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def parse_json_field(value: Any) -> Any:
    """A JSON string parsed; a string that is not JSON as it is; anything else unchanged."""
    if isinstance(value, str):
        # Where the standard library would fail at once ("Expecting value"), two decoders' errors are
        # spared: plain text is common in inputs and outputs.
        if value.lstrip(_JSON_BLANKS)[:1] not in _JSON_STARTS:
            return value
        try:
            return jsonbytes.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


#: What extraction is given for a trace: its rows (from a file: any JSON) or its records (from Langfuse).
RowOrRecord = Mapping[str, Any] | Observation


def raw_row(row: RowOrRecord) -> Mapping[str, Any]:
    """The row as read, of a row or of its record."""
    return row.row if isinstance(row, Observation) else row


def deduped(rows: Iterable[Any], notes: Notes) -> list[RowOrRecord]:
    """Rows de-duplicated (:func:`dedupe_rows`), or records as they are (the adapter de-duplicated them
    where it read them)."""
    given = list(rows) if rows is not None else []
    if given and isinstance(given[0], Observation):
        return given
    return list(dedupe_rows(given, notes))


def observation_at(row: RowOrRecord, seq: int, notes: Notes) -> Observation:
    """The record of a row (made here) or a record, at place ``seq``; what could not be read in ``notes``."""
    observation = row.at(seq) if isinstance(row, Observation) else Observation.from_row(row, seq)
    take(observation, notes)
    return observation


def dedupe_rows(rows: Iterable[Any], notes: Notes) -> list[Mapping[str, Any]]:
    """One row per observation id: the newest ``updatedAt``; rows without an id are kept as they are.
    Unlike :func:`trace_scorer.data.rows.dedupe`, tolerant of any row (the notes say what was skipped), and
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
    """One row → :class:`Observation`, what could not be read in ``notes``."""
    observation = Observation.from_row(row, seq)
    take(observation, notes)
    return observation


def take(observation: Observation, notes: Notes) -> None:
    """What could not be read from the record's row, into the sample's notes."""
    for problem in observation.problems:
        notes.add(problem)


def dedupe_observations(observations: Iterable[Observation]) -> list[Observation]:
    """:func:`trace_scorer.data.rows.dedupe` for records (their ``updatedAt`` parsed once, when read)."""
    by_id: dict[str, Observation] = {}
    for observation in observations:
        held = by_id.get(observation.id)
        if held is None or replaces(observation.updated_at, held.updated_at):
            by_id[observation.id] = observation
    return list(by_id.values())


def started(observation: Observation) -> datetime:
    """A record's start, which Langfuse always sends: ValueError without one (as ``rows.row_start``)."""
    if observation.start is None:
        raise ValueError(f"observation {observation.row.get('id')!r} has no startTime")
    return observation.start


def sort_observations(observations: list[Observation]) -> list[Observation]:
    """Oldest first (ties by id), each record's ``seq`` its place: the order in which the agent did things.
    A record without a start time is refused (:func:`started`)."""
    observations.sort(key=lambda o: (started(o), o.id))
    for seq, observation in enumerate(observations):
        observation.seq = seq
    return observations


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

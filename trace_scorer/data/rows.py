"""Observation rows as Langfuse returns them: their times, and one row per observation.

Shared by the Langfuse adapter (``langfuse/``: pages of rows, streamed) and extraction (``extract/``:
one trace's rows, possibly from a file), so both keep the same row of an observation.

Until ClickHouse merges, one observation can come back as several rows, within a page or across a page
boundary: the newest ``updatedAt`` wins; on a tie, or when the row read first has no ``updatedAt``, the
row read last (:func:`replaces`). Duplicates of one observation share its ``startTime`` (immutable in
Langfuse), and v4 sorts rows by ``startTime`` descending, so duplicates are adjacent in the stream:
holding back only the rows of the current ``startTime`` is enough to de-duplicate a stream without
holding the whole window (:class:`StreamDeduper`, over rows read into typed records: their times parsed
once).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from trace_scorer.data.times import parse_timestamp

__all__ = ["Row", "StreamDeduper", "Timed", "json_in_text", "replaces", "row_start", "row_time"]

#: One observation row: a camelCase JSON object (``langfuse.types.Row`` is the same type).
Row = dict[str, Any]


def json_in_text(value: Any, opens: str = "{[", *, skip_blanks: bool = False) -> Any:
    """The JSON a string holds when it opens like it (its first character, after white space with
    ``skip_blanks``, is one of ``opens``); anything else, a string that is not JSON included, as it is.

    Langfuse sends inputs, outputs and metadata values as raw strings, and tools return JSON as text: a
    string holding a number, boolean or null is left a string (``"2"`` is as likely the text as the number).
    """
    if not isinstance(value, str):
        return value
    head = value.lstrip()[:1] if skip_blanks else value[:1]
    if not head or head not in opens:
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def row_time(row: Mapping[str, Any], key: str) -> datetime | None:
    """The time under ``key``; None when absent or empty (ValueError when it is not a time)."""
    value = row.get(key)
    if isinstance(value, str) and value:
        return parse_timestamp(value)
    return None


def row_start(row: Mapping[str, Any]) -> datetime:
    start = row_time(row, "startTime")
    if start is None:
        raise ValueError(f"observation {row.get('id')!r} has no startTime")
    return start


def replaces(updated: datetime | None, previous: datetime | None) -> bool:
    """Whether a row of an observation updated at ``updated`` replaces the one read before it, updated
    at ``previous``: yes when it is newer or as new, or the earlier one has no time; no when only the
    earlier one has a time."""
    if previous is None:
        return True
    return updated is not None and updated >= previous


class Timed(Protocol):
    """A row read into a typed record: its observation's id, start and ``updatedAt``."""

    @property
    def observation_id(self) -> str: ...
    @property
    def start_time(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime | None: ...


T = TypeVar("T", bound=Timed)


class StreamDeduper(Generic[T]):
    """De-duplicates a stream of records sorted by start time descending (see the module docstring); the
    records' times were parsed when they were read."""

    def __init__(self) -> None:
        self._held: dict[str, T] = {}
        self._held_start: datetime | None = None

    def push(self, records: Iterable[T]) -> list[T]:
        """Take a page; return the records that can no longer have a duplicate coming."""
        out: list[T] = []
        for record in records:
            start = record.start_time
            if self._held_start is not None and start != self._held_start:
                out.extend(self._held.values())
                self._held = {}
            self._held_start = start
            key = record.observation_id
            held = self._held.get(key)
            if held is None or replaces(record.updated_at, held.updated_at):
                self._held[key] = record
        return out

    def flush(self) -> list[T]:
        out = list(self._held.values())
        self._held = {}
        self._held_start = None
        return out

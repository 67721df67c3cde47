"""The one ISO 8601 time parser: Langfuse's times, exported rows, experiment items.

``2026-10-01T00:12:00.875Z``, ``...+02:00``, fractional seconds of any length (beyond microseconds they
are cut), a space instead of ``T``, a bare date; a time without an offset is taken as UTC. Every
result is timezone-aware, so times from different sources compare.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["parse_time", "parse_timestamp"]


def parse_timestamp(value: str) -> datetime:
    """An ISO 8601 time → an aware datetime (UTC when it has no offset); ValueError when it is not one."""
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_time(value: Any) -> datetime | None:
    """Lenient :func:`parse_timestamp`: a datetime (made aware) or an ISO 8601 string → an aware
    datetime; anything else, including a string that is not a time, → None."""
    if isinstance(value, str):  # first: Langfuse's times (two a row) are strings
        try:
            return parse_timestamp(value) if value else None
        except ValueError:
            return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return None

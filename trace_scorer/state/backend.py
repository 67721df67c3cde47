"""What a database must offer the state store (:class:`Backend`), and the error every backend raises for
a state that cannot be used (:class:`StateError`).

The store (:mod:`trace_scorer.state.store`) writes its SQL once, with ``?`` placeholders and the
``INSERT … ON CONFLICT … RETURNING`` upserts both SQLite and PostgreSQL understand; a backend runs it,
converts times to and from its columns, and owns opening, locking, migrating and transactions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from trace_scorer.errors import UserError

T = TypeVar("T")

#: A row as a backend returns it (times still in the backend's own form: see :meth:`Backend.time_value`).
Row = tuple[Any, ...]


class StateError(UserError):
    """The state cannot be used (damaged, locked by another worker, not writable, unreachable, …)."""

    heading = "state error: "


class StateInUse(StateError):
    """The SQLite state is held by another process (a running worker, as a rule)."""


class Backend(Protocol):
    """One open state database. Used by one thread at a time (the worker's event loop)."""

    #: What the state is, for messages and ``trace-scorer check`` (never a password): "SQLite file …",
    #: "PostgreSQL postgresql://host:5432/db (schema trace_scorer)".
    description: str
    #: The schema version the state had when it was opened (before any migration).
    found_version: int

    @property
    def schema_version(self) -> int:
        """The schema version the state has now."""
        ...

    #: Values one :meth:`member_of` condition takes at most (lookups of more are split).
    max_members: int

    def member_of(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """The SQL (after a column) and the parameters of "is one of ``values``": ``IN (?, …)`` on SQLite,
        ``= ANY(?)`` with one array on PostgreSQL (which plans a 200-value ``IN`` list ~50× slower)."""
        ...

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement that returns rows (``?`` placeholders) and return them all."""
        ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement that returns nothing."""
        ...

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters."""
        ...

    def stream(self, sql: str, size: int) -> Iterator[list[Row]]:
        """The rows of one query, ``size`` at a time (a whole table without holding it in memory)."""
        ...

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Add rows to a table, as fast as the backend can."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """An outermost transaction: committed when the block ends, rolled back when it raises."""
        ...

    def retrying(self, work: Callable[[], T]) -> T:
        """``work()`` (which opens its own transaction), run again after a conflict between concurrent
        writers that the database resolved by rolling it back (none on SQLite: one writer at a time)."""
        ...

    def lock_tables(self, names: Sequence[str]) -> None:
        """Inside a transaction: keep other writers out of these tables until it ends."""
        ...

    def time_param(self, moment: datetime) -> Any:
        """A timezone-aware UTC time as this backend stores it."""
        ...

    def time_value(self, raw: Any) -> datetime | None:
        """A stored time (or NULL) back as a timezone-aware datetime."""
        ...

    def close(self) -> None:
        """Close the connection and release what the backend holds (closing twice is harmless)."""
        ...

"""The worker's memory between ticks, restarts and replicas: :class:`StateStore`, on either backend.

Per target it keeps the watermark (how far production traces have been scored), the ledger of what was
scored with which configuration hash (so a restart re-posts nothing and a configuration change
re-scores), traces that failed with their next-try time and number of tries (the watermark does not
wait for them), and each dataset run's first-seen time (the deterministic timestamp of its run-level
scores, since Langfuse reports run start times only within the queried window).

The semantics are written here once, in SQL both backends run; a backend (:mod:`.sqlite`,
:mod:`.postgres`) opens, locks, migrates and runs it. Every write is a single upsert computed by the
database from the committed row (``tries = failures.tries + 1``; ``first_seen`` never in the update), so
several processes sharing a PostgreSQL state lose no update; nothing is cached in the process.

Writes are transactional: ``with store.transaction():`` groups the ledger and watermark updates of one
window so they land together or not at all. A write outside any transaction is its own transaction, run
again on PostgreSQL after a deadlock or serialization failure; :meth:`StateStore.run_in_transaction`
does the same for a group of writes the caller can replay.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from trace_scorer.state.backend import Backend, Row
from trace_scorer.state.schema import TABLES, Table
from trace_scorer.state.sqlite import SqliteBackend

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    subject: str
    tries: int
    next_try: datetime | None
    last_error: str
    payload: str | None = None


@dataclass(frozen=True)
class StoredResult:
    """One trace's per-sample results in a run, kept for the run-level metrics."""

    subject: str
    item_id: str | None
    outcomes: str  # JSON, see trace_scorer.worker.scores


@dataclass(frozen=True)
class RunState:
    run_id: str
    first_seen: datetime
    item_count: int
    last_change: datetime | None
    posted_hash: str | None


def _aware(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("state times must be timezone-aware")
    return moment.astimezone(UTC)


class StateStore:
    """The state on one backend. ``StateStore(path)`` opens (or creates) the SQLite file at ``path``;
    ``StateStore(backend)`` uses an open backend (see :func:`trace_scorer.state.open_state`, which picks it
    from ``[state]``). Used by one thread at a time (the worker's event loop)."""

    def __init__(self, source: Path | str | Backend) -> None:
        self._backend: Backend = SqliteBackend(source) if isinstance(source, str | os.PathLike) else source
        self._depth = 0

    @property
    def description(self) -> str:
        """What and where the state is (never a password)."""
        return self._backend.description

    @property
    def schema_version(self) -> int:
        return self._backend.schema_version

    @property
    def found_version(self) -> int:
        """The schema version the state had when it was opened, before any migration."""
        return self._backend.found_version

    def close(self) -> None:
        """Close the connection (and, on SQLite, release the file's lock); closing twice is harmless."""
        self._backend.close()

    # -- transactions ------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside land together (nested uses join the outer transaction)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._backend.transaction():
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0

    def run_in_transaction(self, work: Callable[[], T]) -> T:
        """``work()`` in one transaction, run again whole if PostgreSQL rolled it back for a deadlock or a
        serialization failure — so ``work`` must be safe to repeat (state calls only). Inside an outer
        transaction it simply joins it (a conflict then rolls back and raises from the outer one)."""
        if self._depth:
            return work()

        def attempt() -> T:
            with self.transaction():
                return work()

        return self._backend.retrying(attempt)

    # -- watermarks --------------------------------------------------------------------------------

    def watermark(self, target: str) -> datetime | None:
        rows = self._backend.fetch("SELECT value FROM watermarks WHERE target = ?", (target,))
        return self._backend.time_value(rows[0][0]) if rows else None

    def set_watermark(self, target: str, value: datetime) -> None:
        moment = self._backend.time_param(_aware(value))
        self.run_in_transaction(
            lambda: self._backend.execute(
                "INSERT INTO watermarks (target, value) VALUES (?, ?) "
                "ON CONFLICT (target) DO UPDATE SET value = excluded.value",
                (target, moment),
            )
        )

    # -- ledger ------------------------------------------------------------------------------------

    def _lookup(self, query: str, target: str, subjects: Iterable[str]) -> list[Row]:
        """``query`` (``{members}``: "subject is one of these") over ``subjects``, a chunk at a time."""
        wanted = list(subjects)
        rows: list[Row] = []
        size = self._backend.max_members
        for start in range(0, len(wanted), size):
            members, params = self._backend.member_of(wanted[start : start + size])
            rows += self._backend.fetch(query.format(members=members), (target, *params))
        return rows

    def scored_hashes(self, target: str, subjects: Iterable[str]) -> dict[str, str]:
        """The configuration hash each subject was last scored with (subjects never scored are absent)."""
        query = "SELECT subject, config_hash FROM ledger WHERE target = ? AND subject {members}"
        return {r[0]: r[1] for r in self._lookup(query, target, subjects)}

    def record_scored(
        self, target: str, subjects: Iterable[str], config_hash: str, now: datetime, *, reason: str | None = None
    ) -> None:
        """Subjects whose scores were accepted — or, with a ``reason``, that are done without scores (e.g. a
        trace over the row cap): remembered with the hash so they are not read again, failures cleared."""
        at = self._backend.time_param(_aware(now))
        done = sorted(set(subjects))  # key order: concurrent writers lock rows in the same order

        def write() -> None:
            self._backend.execute_many(
                "INSERT INTO ledger (target, subject, config_hash, scored_at, reason) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (target, subject) DO UPDATE SET config_hash = excluded.config_hash, "
                "scored_at = excluded.scored_at, reason = excluded.reason",
                [(target, subject, config_hash, at, reason) for subject in done],
            )
            for start in range(0, len(done), self._backend.max_members):
                members, params = self._backend.member_of(done[start : start + self._backend.max_members])
                self._backend.execute(f"DELETE FROM failures WHERE target = ? AND subject {members}", (target, *params))

        self.run_in_transaction(write)

    def done_reason(self, target: str, subject: str) -> str | None:
        """Why a subject in the ledger is done without scores (None: scored, or not in the ledger).
        For tests and benches only."""
        rows = self._backend.fetch("SELECT reason FROM ledger WHERE target = ? AND subject = ?", (target, subject))
        return None if not rows else rows[0][0]

    # -- failures ----------------------------------------------------------------------------------

    def record_failure(
        self, target: str, subject: str, error: str, next_try: datetime | None, payload: str | None = None
    ) -> int:
        """Count one more failed try; ``next_try`` None means give up. Returns the number of tries."""
        when = None if next_try is None else self._backend.time_param(_aware(next_try))
        rows = self.run_in_transaction(
            lambda: self._backend.fetch(
                "INSERT INTO failures (target, subject, tries, next_try, last_error, payload) "
                "VALUES (?, ?, 1, ?, ?, ?) "
                "ON CONFLICT (target, subject) DO UPDATE SET tries = failures.tries + 1, "
                "next_try = excluded.next_try, last_error = excluded.last_error, "
                "payload = coalesce(excluded.payload, failures.payload) "
                "RETURNING tries",
                (target, subject, when, error, payload),
            )
        )
        return int(rows[0][0])

    def _failure(self, row: Row) -> Failure:
        return Failure(row[0], row[1], self._backend.time_value(row[2]), row[3], row[4])

    def failure(self, target: str, subject: str) -> Failure | None:
        rows = self._backend.fetch(
            "SELECT subject, tries, next_try, last_error, payload FROM failures WHERE target = ? AND subject = ?",
            (target, subject),
        )
        return self._failure(rows[0]) if rows else None

    def failed_subjects(self, target: str, subjects: Iterable[str]) -> set[str]:
        """Which of these subjects have a failure on record (due, waiting or given up)."""
        query = "SELECT subject FROM failures WHERE target = ? AND subject {members}"
        return {r[0] for r in self._lookup(query, target, subjects)}

    def due_failures(self, target: str, now: datetime, limit: int = 1000) -> list[Failure]:
        """Failed subjects whose next try has come (oldest first); given-up ones are never due."""
        rows = self._backend.fetch(
            "SELECT subject, tries, next_try, last_error, payload FROM failures "
            "WHERE target = ? AND next_try IS NOT NULL AND next_try <= ? ORDER BY next_try, subject LIMIT ?",
            (target, self._backend.time_param(_aware(now)), limit),
        )
        return [self._failure(r) for r in rows]

    # -- dataset runs ------------------------------------------------------------------------------

    def _run(self, row: Row) -> RunState:
        first_seen = self._backend.time_value(row[1])
        assert first_seen is not None
        return RunState(row[0], first_seen, row[2], self._backend.time_value(row[3]), row[4])

    def run(self, target: str, run_id: str) -> RunState | None:
        rows = self._backend.fetch(
            "SELECT run_id, first_seen, item_count, last_change, posted_hash FROM runs WHERE target = ? AND run_id = ?",
            (target, run_id),
        )
        return self._run(rows[0]) if rows else None

    def see_run(self, target: str, run_id: str, item_count: int, now: datetime) -> RunState:
        """Note a run's current item count; its first-seen time is kept from the first call on.

        ``last_change`` moves only when the count changes, which is what the quiet period is measured from.
        """
        at = self._backend.time_param(_aware(now))
        rows = self.run_in_transaction(
            lambda: self._backend.fetch(
                "INSERT INTO runs (target, run_id, first_seen, item_count, last_change) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (target, run_id) DO UPDATE SET "
                "last_change = CASE WHEN runs.item_count = excluded.item_count "
                "THEN runs.last_change ELSE excluded.last_change END, "
                "item_count = excluded.item_count "
                "RETURNING run_id, first_seen, item_count, last_change, posted_hash",
                (target, run_id, at, item_count, at),
            )
        )
        return self._run(rows[0])

    def runs_changed_since(self, target: str, since: datetime) -> list[str]:
        """Ids of the target's runs whose item count last changed at or after ``since`` (still followed)."""
        rows = self._backend.fetch(
            "SELECT run_id FROM runs WHERE target = ? AND last_change >= ? ORDER BY run_id",
            (target, self._backend.time_param(_aware(since))),
        )
        return [r[0] for r in rows]

    def set_run_posted(self, target: str, run_id: str, posted_hash: str) -> None:
        """Remember what the run-level scores were last posted for (items and configuration)."""
        self.run_in_transaction(
            lambda: self._backend.execute(
                "UPDATE runs SET posted_hash = ? WHERE target = ? AND run_id = ?", (posted_hash, target, run_id)
            )
        )

    def save_results(self, target: str, run_id: str, results: Iterable[StoredResult]) -> None:
        """Keep (replace) these traces' per-sample results of a run."""
        rows = sorted((target, run_id, r.subject, r.item_id, r.outcomes) for r in results)
        self.run_in_transaction(
            lambda: self._backend.execute_many(
                "INSERT INTO run_results (target, run_id, subject, item_id, outcomes) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (target, run_id, subject) DO UPDATE SET item_id = excluded.item_id, "
                "outcomes = excluded.outcomes",
                rows,
            )
        )

    def run_results(self, target: str, run_id: str) -> list[StoredResult]:
        rows = self._backend.fetch(
            "SELECT subject, item_id, outcomes FROM run_results WHERE target = ? AND run_id = ? ORDER BY subject",
            (target, run_id),
        )
        return [StoredResult(r[0], r[1], r[2]) for r in rows]

    # -- whole tables (``trace-scorer state import``) ----------------------------------------------

    def export_rows(self, table: Table, chunk: int = 10_000) -> Iterator[list[tuple[Any, ...]]]:
        """Every row of ``table`` in key order, ``chunk`` rows at a time, times as datetimes."""
        times = [i for i, c in enumerate(table.columns) if c in table.times]
        columns = ", ".join(table.columns)
        for rows in self._backend.stream(f"SELECT {columns} FROM {table.name} ORDER BY {columns}", chunk):
            yield [tuple(self._backend.time_value(v) if i in times else v for i, v in enumerate(r)) for r in rows]

    def row_counts(self) -> dict[str, int]:
        """Rows per table of the current schema."""
        return {t.name: int(self._backend.fetch(f"SELECT count(*) FROM {t.name}")[0][0]) for t in TABLES}

    def lock_for_import(self) -> None:
        """Inside a transaction: keep every other writer out of the state until it ends."""
        self._backend.lock_tables([t.name for t in TABLES])

    def delete_rows(self, table: Table) -> None:
        """Inside a transaction: every row of ``table`` deleted."""
        self._backend.execute(f"DELETE FROM {table.name}")

    def insert_rows(self, table: Table, rows: Sequence[tuple[Any, ...]]) -> None:
        """Inside a transaction: these rows (times as datetimes) added to ``table``."""
        times = [i for i, c in enumerate(table.columns) if c in table.times]
        self._backend.bulk_insert(
            table.name,
            table.columns,
            [
                tuple(self._backend.time_param(v) if i in times and v is not None else v for i, v in enumerate(r))
                for r in rows
            ],
        )

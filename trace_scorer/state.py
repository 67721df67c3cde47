"""The worker's memory between ticks and restarts: an embedded SQLite file.

Per target it keeps the watermark (how far production traces have been scored), the ledger of what was
scored with which configuration hash (so a restart re-posts nothing and a configuration change
re-scores), traces that failed with their next-try time and number of tries (the watermark does not
wait for them), and each dataset run's first-seen time (the deterministic timestamp of its run-level
scores, since Langfuse reports run start times only within the queried window).

Writes are transactional: ``with store.transaction():`` groups the ledger and watermark updates of one
window so they land together or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trace_scorer.times import parse_timestamp

_SCHEMA = """
CREATE TABLE IF NOT EXISTS watermarks (
    target TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    target      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    scored_at   TEXT NOT NULL,
    PRIMARY KEY (target, subject)
);
CREATE TABLE IF NOT EXISTS failures (
    target     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    tries      INTEGER NOT NULL,
    next_try   TEXT,            -- NULL: given up
    last_error TEXT NOT NULL,
    payload    TEXT,            -- what is needed to fetch the subject again (JSON)
    PRIMARY KEY (target, subject)
);
CREATE TABLE IF NOT EXISTS runs (
    target       TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    first_seen   TEXT NOT NULL,
    item_count   INTEGER NOT NULL DEFAULT 0,
    last_change  TEXT,
    posted_hash  TEXT,
    PRIMARY KEY (target, run_id)
);
CREATE TABLE IF NOT EXISTS run_results (
    target   TEXT NOT NULL,
    run_id   TEXT NOT NULL,
    subject  TEXT NOT NULL,
    item_id  TEXT,
    outcomes TEXT NOT NULL,     -- JSON: score name → {"value"} | {"skipped"} | {"failed"}
    PRIMARY KEY (target, run_id, subject)
);
"""


def _text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("state times must be timezone-aware")
    return moment.astimezone(UTC).isoformat()


def _time(text: str | None) -> datetime | None:
    return None if text is None else parse_timestamp(text)


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


class StateStore:
    """SQLite-backed state. One store per worker process; not shared between processes."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a watermark that moved must survive a power cut
        self._db.executescript(_SCHEMA)
        self._depth = 0

    def close(self) -> None:
        self._db.close()

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
        self._db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")
        finally:
            self._depth = 0

    # -- watermarks ------------------------------------------------------------------------------

    def watermark(self, target: str) -> datetime | None:
        row = self._db.execute("SELECT value FROM watermarks WHERE target = ?", (target,)).fetchone()
        return _time(row[0]) if row else None

    def set_watermark(self, target: str, value: datetime) -> None:
        with self.transaction():
            self._db.execute(
                "INSERT INTO watermarks (target, value) VALUES (?, ?) "
                "ON CONFLICT (target) DO UPDATE SET value = excluded.value",
                (target, _text(value)),
            )

    # -- ledger ----------------------------------------------------------------------------------

    def scored_hashes(self, target: str, subjects: Iterable[str]) -> dict[str, str]:
        """The configuration hash each subject was last scored with (subjects never scored are absent)."""
        wanted = list(subjects)
        found: dict[str, str] = {}
        for start in range(0, len(wanted), 500):  # stay under SQLite's parameter limit
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT subject, config_hash FROM ledger WHERE target = ? AND subject IN ({marks})",
                (target, *chunk),
            )
            found.update(dict(rows.fetchall()))
        return found

    def record_scored(self, target: str, subjects: Iterable[str], config_hash: str, now: datetime) -> None:
        """Subjects whose scores were accepted: remembered with the hash, and their failures cleared."""
        rows = [(target, subject, config_hash, _text(now)) for subject in subjects]
        with self.transaction():
            self._db.executemany(
                "INSERT INTO ledger (target, subject, config_hash, scored_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (target, subject) DO UPDATE SET config_hash = excluded.config_hash, "
                "scored_at = excluded.scored_at",
                rows,
            )
            self._db.executemany(
                "DELETE FROM failures WHERE target = ? AND subject = ?", [(target, r[1]) for r in rows]
            )

    # -- failures --------------------------------------------------------------------------------

    def record_failure(
        self, target: str, subject: str, error: str, next_try: datetime | None, payload: str | None = None
    ) -> int:
        """Count one more failed try; ``next_try`` None means give up. Returns the number of tries."""
        with self.transaction():
            row = self._db.execute(
                "SELECT tries FROM failures WHERE target = ? AND subject = ?", (target, subject)
            ).fetchone()
            tries = (row[0] if row else 0) + 1
            self._db.execute(
                "INSERT INTO failures (target, subject, tries, next_try, last_error, payload) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (target, subject) DO UPDATE SET tries = excluded.tries, "
                "next_try = excluded.next_try, last_error = excluded.last_error, "
                "payload = coalesce(excluded.payload, failures.payload)",
                (target, subject, tries, None if next_try is None else _text(next_try), error, payload),
            )
        return tries

    def failure(self, target: str, subject: str) -> Failure | None:
        row = self._db.execute(
            "SELECT subject, tries, next_try, last_error, payload FROM failures WHERE target = ? AND subject = ?",
            (target, subject),
        ).fetchone()
        return None if row is None else Failure(row[0], row[1], _time(row[2]), row[3], row[4])

    def failed_subjects(self, target: str, subjects: Iterable[str]) -> set[str]:
        """Which of these subjects have a failure on record (due, waiting or given up)."""
        wanted = list(subjects)
        found: set[str] = set()
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT subject FROM failures WHERE target = ? AND subject IN ({marks})", (target, *chunk)
            )
            found.update(r[0] for r in rows.fetchall())
        return found

    def due_failures(self, target: str, now: datetime, limit: int = 1000) -> list[Failure]:
        """Failed subjects whose next try has come (oldest first); given-up ones are never due."""
        rows = self._db.execute(
            "SELECT subject, tries, next_try, last_error, payload FROM failures "
            "WHERE target = ? AND next_try IS NOT NULL AND next_try <= ? ORDER BY next_try LIMIT ?",
            (target, _text(now), limit),
        )
        return [Failure(r[0], r[1], _time(r[2]), r[3], r[4]) for r in rows.fetchall()]

    # -- dataset runs ----------------------------------------------------------------------------

    def run(self, target: str, run_id: str) -> RunState | None:
        row = self._db.execute(
            "SELECT run_id, first_seen, item_count, last_change, posted_hash FROM runs WHERE target = ? AND run_id = ?",
            (target, run_id),
        ).fetchone()
        if row is None:
            return None
        first_seen = _time(row[1])
        assert first_seen is not None
        return RunState(row[0], first_seen, row[2], _time(row[3]), row[4])

    def see_run(self, target: str, run_id: str, item_count: int, now: datetime) -> RunState:
        """Note a run's current item count; its first-seen time is kept from the first call on.

        ``last_change`` moves only when the count changes, which is what the quiet period is measured from.
        """
        with self.transaction():
            current = self.run(target, run_id)
            if current is None:
                self._db.execute(
                    "INSERT INTO runs (target, run_id, first_seen, item_count, last_change) VALUES (?, ?, ?, ?, ?)",
                    (target, run_id, _text(now), item_count, _text(now)),
                )
            elif current.item_count != item_count:
                self._db.execute(
                    "UPDATE runs SET item_count = ?, last_change = ? WHERE target = ? AND run_id = ?",
                    (item_count, _text(now), target, run_id),
                )
            state = self.run(target, run_id)
        assert state is not None
        return state

    def runs_changed_since(self, target: str, since: datetime) -> list[str]:
        """Ids of the target's runs whose item count last changed at or after ``since`` (still followed)."""
        rows = self._db.execute(
            "SELECT run_id FROM runs WHERE target = ? AND last_change >= ? ORDER BY run_id",
            (target, _text(since)),
        )
        return [r[0] for r in rows.fetchall()]

    def set_run_posted(self, target: str, run_id: str, posted_hash: str) -> None:
        """Remember what the run-level scores were last posted for (items and configuration)."""
        with self.transaction():
            self._db.execute(
                "UPDATE runs SET posted_hash = ? WHERE target = ? AND run_id = ?", (posted_hash, target, run_id)
            )

    def save_results(self, target: str, run_id: str, results: Iterable[StoredResult]) -> None:
        """Keep (replace) these traces' per-sample results of a run."""
        with self.transaction():
            self._db.executemany(
                "INSERT INTO run_results (target, run_id, subject, item_id, outcomes) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (target, run_id, subject) DO UPDATE SET item_id = excluded.item_id, "
                "outcomes = excluded.outcomes",
                [(target, run_id, r.subject, r.item_id, r.outcomes) for r in results],
            )

    def run_results(self, target: str, run_id: str) -> list[StoredResult]:
        rows = self._db.execute(
            "SELECT subject, item_id, outcomes FROM run_results WHERE target = ? AND run_id = ? ORDER BY subject",
            (target, run_id),
        )
        return [StoredResult(r[0], r[1], r[2]) for r in rows.fetchall()]

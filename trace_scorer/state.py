"""The worker's memory between ticks and restarts: an embedded SQLite file.

Per target it keeps the watermark (how far production traces have been scored), the ledger of what was
scored with which configuration hash (so a restart re-posts nothing and a configuration change
re-scores), traces that failed with their next-try time and number of tries (the watermark does not
wait for them), and each dataset run's first-seen time (the deterministic timestamp of its run-level
scores, since Langfuse reports run start times only within the queried window).

Writes are transactional: ``with store.transaction():`` groups the ledger and watermark updates of one
window so they land together or not at all.

Opening the state:

- One process at a time: an exclusive ``flock`` on ``<state>.lock`` (next to the file; it holds the
  holder's pid) is taken before the file is touched, and the kernel drops it when the process ends, however
  it ends (``kill -9`` included). A second worker on the same state is refused with a :class:`StateError`
  (two would post every score twice). The lock file is left behind on exit; it is harmless.
- A state that cannot be used is refused with a :class:`StateError` naming the file and the fix, never a
  raw SQLite traceback: not a database or damaged (checked with ``PRAGMA quick_check`` at every start),
  not writable, the disk full, or written by a newer release. A missing file is a new state; an existing
  **empty (0-byte) file is refused** — starting from it would score and post every trace again.
- The schema is versioned (``PRAGMA user_version``); :data:`MIGRATIONS` brings an older file up to
  :data:`SCHEMA_VERSION` step by step, each step in its own transaction. Files from before versioning have
  user_version 0 and the version-1 tables already (the first step only creates what is missing).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trace_scorer.errors import UserError
from trace_scorer.times import parse_timestamp

_SCHEMA_V1 = """
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

#: Schema migrations: step ``i`` brings a file from user_version ``i`` to ``i + 1``, in one transaction.
#: Add a step at the end for every schema change; never edit a released one.
MIGRATIONS: tuple[str, ...] = (
    _SCHEMA_V1,
    # 2: why a subject was done without scores (e.g. a trace over the row cap); NULL = scored.
    "ALTER TABLE ledger ADD COLUMN reason TEXT;",
)
#: The schema version this release writes; a file with a higher one is refused.
SCHEMA_VERSION = len(MIGRATIONS)

_FIX_DAMAGED = (
    "Restore it from a backup, or move it aside to start from a new state (every trace within the "
    "lookback is then scored and posted again)."
)


class StateError(UserError):
    """The state file cannot be used (damaged, locked by another worker, not writable, …)."""

    heading = "state error: "


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # a watermark that moved must survive a power cut
    except BaseException:
        db.close()
        raise
    return db


class _FileLock:
    """An exclusive ``flock`` on ``<state>.lock``, holding the holder's pid; the kernel releases it when
    the process ends, however it ends."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, state: Path) -> _FileLock:
        path = state.with_name(state.name + ".lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise _not_writable(state, f"cannot open {path.name}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            who = f"pid {holder}" if holder.isdigit() else "pid unknown"
            raise StateError(
                f"the state file {state} is in use by another trace-scorer process ({who}, holding {path}). "
                "Two workers on one state would post every score twice: stop the other one first, or give "
                "this one its own [state] path."
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StateError(f"cannot lock the state file {state} ({path}: {exc.strerror or exc}).") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # drops the lock; the file stays (removing it would race a waiting starter)
            self._fd = None


def _not_writable(path: Path, detail: str) -> StateError:
    return StateError(
        f"cannot write the state file {path} ({detail}): the worker must be able to write it and create files "
        f"in {path.parent} (its -wal, -shm and .lock files). Fix the permissions or ownership, or set [state] "
        "path to a writable location."
    )


def _explain(path: Path, exc: sqlite3.Error) -> StateError:
    """An SQLite error at open as what the user can do about it."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    detail = f"{getattr(exc, 'sqlite_errorname', None) or type(exc).__name__}: {exc}"
    if code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return StateError(f"the state file {path} is not a readable trace-scorer state ({detail}). {_FIX_DAMAGED}")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return _not_writable(path, detail)
    if code == sqlite3.SQLITE_FULL:
        return StateError(
            f"cannot write the state file {path} ({detail}): the disk is full. Free space on the file system "
            f"holding {path.parent}, then start again."
        )
    return StateError(f"cannot open the state file {path} ({detail}).")


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
    """SQLite-backed state. One store per worker process: a second one on the same file (in this or
    another process) is refused while the first is open."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._depth = 0
        self._lock: _FileLock | None = None
        if str(path) == ":memory:":
            self._db = _connect(str(path))
            self._migrate()
            return
        self.path = self.path.absolute()  # messages name the file wherever the worker was started from
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _not_writable(self.path, exc.strerror or str(exc)) from exc
        self._lock = _FileLock.acquire(self.path)
        try:
            self._refuse_empty()
            self._db = _connect(str(path))
            try:
                self._check()
                self._migrate()
                self._probe_write()
            except BaseException:
                self._db.close()
                raise
        except sqlite3.Error as exc:
            self._lock.release()
            raise _explain(self.path, exc) from exc
        except BaseException:
            self._lock.release()
            raise

    def close(self) -> None:
        """Close the file and release the lock (closing twice is harmless)."""
        self._db.close()
        if self._lock is not None:
            self._lock.release()

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _refuse_empty(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return  # a new state
        wal = self.path.with_name(self.path.name + "-wal")
        if size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            raise StateError(
                f"the state file {self.path} is empty (0 bytes): it holds no watermark and no ledger, so "
                "starting from it would score and post again every trace within the lookback. If that is what "
                "you want, delete the file (a missing file starts a new state); otherwise restore it from a backup."
            )

    def _migrate(self) -> None:
        """Bring the file to :data:`SCHEMA_VERSION`, one transaction per step; refuse a newer file."""
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise StateError(
                f"the state file {self.path} has schema version {version}, newer than this release of "
                f"trace-scorer knows (up to {SCHEMA_VERSION}): it was written by a newer release. Run that "
                "release (or a later one) on it, or set [state] path to another file."
            )
        if version == 0:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "watermarks" not in tables:
                raise StateError(
                    f"the file {self.path} is an SQLite database but not a trace-scorer state (no watermarks "
                    "table): set [state] path to the worker's own state file, or to a new one."
                )
        for step in range(version, SCHEMA_VERSION):
            try:
                self._db.executescript(
                    f"BEGIN IMMEDIATE;\n{MIGRATIONS[step]}\nPRAGMA user_version = {step + 1};\nCOMMIT;"
                )
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _probe_write(self) -> None:
        """A read-only file opens and reads fine: find out now, not at the first write mid-tick."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _check(self) -> None:
        """Refuse a damaged file now rather than at the first read of the damaged page (mid-tick)."""
        problems = [r[0] for r in self._db.execute("PRAGMA quick_check(3)").fetchall()]
        if problems != ["ok"]:
            raise StateError(f"the state file {self.path} is damaged ({'; '.join(problems)}). {_FIX_DAMAGED}")

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

    def record_scored(
        self, target: str, subjects: Iterable[str], config_hash: str, now: datetime, *, reason: str | None = None
    ) -> None:
        """Subjects whose scores were accepted — or, with a ``reason``, that are done without scores (e.g. a
        trace over the row cap): remembered with the hash so they are not read again, failures cleared."""
        rows = [(target, subject, config_hash, _text(now), reason) for subject in subjects]
        with self.transaction():
            self._db.executemany(
                "INSERT INTO ledger (target, subject, config_hash, scored_at, reason) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (target, subject) DO UPDATE SET config_hash = excluded.config_hash, "
                "scored_at = excluded.scored_at, reason = excluded.reason",
                rows,
            )
            self._db.executemany(
                "DELETE FROM failures WHERE target = ? AND subject = ?", [(target, r[1]) for r in rows]
            )

    def done_reason(self, target: str, subject: str) -> str | None:
        """Why a subject in the ledger is done without scores (None: scored, or not in the ledger)."""
        row = self._db.execute(
            "SELECT reason FROM ledger WHERE target = ? AND subject = ?", (target, subject)
        ).fetchone()
        return None if row is None else row[0]

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

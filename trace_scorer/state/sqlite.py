"""The SQLite backend: the state in one local file, the zero-setup default.

- One process at a time: an exclusive ``flock`` on ``<state>.lock`` (next to the file; it holds the
  holder's pid) is taken before the file is touched, and the kernel drops it when the process ends, however
  it ends (``kill -9`` included). A second worker on the same state is refused with a :class:`StateInUse`
  (two would post every score twice). The lock file is left behind on exit; it is harmless.
- A state that cannot be used is refused with a :class:`StateError` naming the file and the fix, never a
  raw SQLite traceback: not a database or damaged (checked with ``PRAGMA quick_check`` at every start),
  not writable, the disk full, or written by a newer release. A missing file is a new state; an existing
  **empty (0-byte) file is refused** — starting from it would score and post every trace again.
- The schema version is ``PRAGMA user_version``; each migration step runs in its own transaction. Files
  from before versioning have user_version 0 and the version-1 tables already (the first step only creates
  what is missing).
- Times are ISO 8601 text in UTC (they compare as text because they are all written the same way).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from trace_scorer.data.times import parse_timestamp
from trace_scorer.state.backend import Row, StateError, StateInUse
from trace_scorer.state.schema import MIGRATIONS, SCHEMA_VERSION

T = TypeVar("T")

_FIX_DAMAGED = (
    "Restore it from a backup, or move it aside to start from a new state (every trace within the "
    "lookback is then scored and posted again)."
)


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
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise _not_writable(state, f"cannot open {path.name}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            who = f"pid {holder}" if holder.isdigit() else "pid unknown"
            raise StateInUse(
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


def _create_private(path: Path) -> None:
    """A new state file readable by its owner only (0600): it names every trace scored. SQLite gives its
    ``-wal`` and ``-shm`` files the database file's mode, so they are private too. An existing file keeps
    the mode its operator gave it."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise _not_writable(path, exc.strerror or str(exc)) from exc


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


def _failed_at_work(path: Path, exc: sqlite3.Error) -> StateError:
    """An SQLite error of a running worker (disk full, file made read-only, I/O error) as what the user can
    do: the worker keeps what it posted and writes it once the state takes writes again."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    detail = f"{getattr(exc, 'sqlite_errorname', None) or type(exc).__name__}: {exc}"
    if code == sqlite3.SQLITE_FULL:
        fix = f"the disk is full: free space on the file system holding {path.parent}"
    elif code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        fix = f"the worker may no longer write it: fix the permissions of {path} and {path.parent}"
    elif code in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return _explain(path, exc)
    else:
        fix = f"check the file system holding {path.parent}"
    return StateError(
        f"cannot write the state file {path} ({detail}): {fix}. Nothing more is posted for the target until "
        "the write succeeds; the worker tries it again every tick."
    )


class SqliteBackend:
    """The state in an SQLite file (or ``:memory:``), held by this process alone while open.

    ``dry_run``: check the file (lock, integrity, version) and that it could be migrated and written, then
    roll back: the file is left as it was (``trace-scorer check``).
    """

    def __init__(self, path: Path | str, *, dry_run: bool = False) -> None:
        self.path = Path(path)
        self._lock: _FileLock | None = None
        if str(path) == ":memory:":
            self.description = "SQLite in memory"
            self._db = _connect(str(path))
            self.found_version = self.schema_version
            self._migrate(dry_run=dry_run)
            return
        self.path = self.path.absolute()  # messages name the file wherever the worker was started from
        self.description = f"SQLite file {self.path}"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _not_writable(self.path, exc.strerror or str(exc)) from exc
        self._lock = _FileLock.acquire(self.path)
        try:
            self._refuse_empty()
            _create_private(self.path)
            self._db = _connect(str(path))
            try:
                self._check()
                self.found_version = self.schema_version
                self._migrate(dry_run=dry_run)
                if not dry_run:
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

    def _migrate(self, *, dry_run: bool) -> None:
        """Bring the file to :data:`SCHEMA_VERSION`, one transaction per step; refuse a newer file. A dry run
        runs every step and the write in one transaction and rolls it back."""
        version = self.found_version
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
        if dry_run:
            steps = "\n".join(m.sqlite for m in MIGRATIONS[version:])
            # The version written as a real start writes it (the write probe), then all of it rolled back.
            script = f"BEGIN IMMEDIATE;\n{steps}\nPRAGMA user_version = {SCHEMA_VERSION};"
            try:
                self._db.executescript(script)
            finally:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            return
        for step in range(version, SCHEMA_VERSION):
            try:
                self._db.executescript(
                    f"BEGIN IMMEDIATE;\n{MIGRATIONS[step].sqlite}\nPRAGMA user_version = {step + 1};\nCOMMIT;"
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

    # -- what the store runs -------------------------------------------------------------------------

    max_members = 500  # under SQLite's parameter limit

    def member_of(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        return f"IN ({','.join('?' * len(values))})", tuple(values)

    @contextmanager
    def _at_work(self) -> Iterator[None]:
        """A failing statement raises a :class:`StateError` naming the file and the fix, not sqlite3's."""
        try:
            yield
        except sqlite3.Error as exc:
            raise _failed_at_work(self.path, exc) from exc

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self._at_work():
            return self._db.execute(sql, params).fetchall()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._at_work():
            self._db.execute(sql, params)

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._at_work():
            self._db.executemany(sql, rows)

    def stream(self, sql: str, size: int) -> Iterator[list[Row]]:
        cursor = self._db.execute(sql)
        try:
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            cursor.close()

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        marks = ", ".join("?" * len(columns))
        self._db.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._at_work():
            self._db.execute("BEGIN IMMEDIATE")  # the write lock up front: no reader-turned-writer deadlock
        try:
            yield
            with self._at_work():
                self._db.execute("COMMIT")
        except BaseException:
            # SQLite rolls some failures back itself (a full disk, an I/O error): only what is left open.
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the error in hand is the one to report
                    self._db.execute("ROLLBACK")
            raise

    def retrying(self, work: Callable[[], T]) -> T:
        return work()  # one process, one connection: writers never conflict

    def lock_tables(self, names: Sequence[str]) -> None:
        """``BEGIN IMMEDIATE`` already holds the file's write lock."""

    def time_param(self, moment: datetime) -> str:
        return moment.astimezone(UTC).isoformat()

    def time_value(self, raw: Any) -> datetime | None:
        return None if raw is None else parse_timestamp(str(raw))

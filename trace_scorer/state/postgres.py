"""The PostgreSQL backend: one state shared by every worker process that points at it.

- **One connection per store**, synchronous (psycopg 3, autocommit outside the store's transactions).
  The store is called from the worker's event loop, one call at a time, and a loopback or in-cluster
  round trip costs a fraction of a millisecond, so an async driver or a pool would add machinery without
  saving a wait. A connection the server dropped (restart, fail-over) fails the call in hand and is
  replaced on the next one (psycopg marks it ``broken``); nothing is cached in the process, so replicas
  never read a stale copy.
- **Concurrent writers**: every write is one ``INSERT … ON CONFLICT … DO UPDATE`` (the row is locked and
  the update computed from the row as committed: a try counter cannot lose an increment, a first-seen time
  is never overwritten) at ``READ COMMITTED``. Rows are written in key order, so two writers meet in the
  same order; a deadlock or serialization failure the server still reports rolls the transaction back and
  :meth:`PostgresBackend.retrying` runs it again (a few times, with a short jittered back-off).
- **Schema**: the tables live in their own PostgreSQL schema (``[state] db_schema``, default
  ``trace_scorer``; created if missing), so the database can be shared (e.g. with the job queue). The
  version is the one row of ``schema_version``. Opening takes a transaction-level advisory lock for the
  schema, reads the version, applies the missing steps and writes the version — all in one transaction,
  so replicas starting together migrate once (the others wait on the lock, then find the schema current)
  and a failed step leaves nothing half-done (DDL is transactional in PostgreSQL).
- **Outages**: no call waits for ever. A call the server does not answer within :data:`CALL_DEADLINE`
  seconds (a frozen server, a network that drops packets: the kernel still acknowledges, so neither TCP
  keepalives nor the server's ``statement_timeout`` fire) is cut by a watchdog thread that shuts the
  connection's socket, and fails with a :class:`StateError`; the next call reconnects (``connect_timeout``).
  The store is synchronous on the worker's event loop, so this bounds how long the loop (and its probes)
  can wait on the database. The server ends a statement that runs longer (``statement_timeout``), and TCP
  keepalives find a connection whose peer is gone while it is idle.
- **Secrets**: the URL may carry a password; messages show it without (:func:`shown_url`) and any text from
  the driver is scrubbed of it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from trace_scorer.config.state import SCHEMA_NAME
from trace_scorer.runtime.logs import REDACTED, redact_text
from trace_scorer.runtime.retry import backoff
from trace_scorer.state.backend import Row, StateError
from trace_scorer.state.schema import MIGRATIONS, SCHEMA_VERSION, TABLES

log = structlog.get_logger(__name__)

T = TypeVar("T")

#: The first key of the advisory lock taken while migrating (the second is the schema name's hash):
#: "trsc" in ASCII, so it is recognisable in ``pg_locks`` and unlikely to meet another application's.
ADVISORY_LOCK_CLASS = 0x74727363
#: Seconds to wait for a connection when the URL does not say (libpq's default is to wait forever).
CONNECT_TIMEOUT = 5
#: Seconds one call of the worker may wait for the server before its connection is cut (the event loop
#: waits meanwhile).
CALL_DEADLINE = 5.0
#: What the connections set when the URL does not: TCP keepalives (a peer gone while the connection is
#: idle is found in ~1 min, not the kernel's 2 h) and unacknowledged data given up after 30 s.
TCP_DEFAULTS: dict[str, str | int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
#: How the connections show in ``pg_stat_activity`` when the URL does not name them.
APPLICATION_NAME = "trace-scorer"
#: Tries of a transaction that the server rolled back for a deadlock or a serialization failure.
CONFLICT_ATTEMPTS = 5
_CONFLICTS = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)

_HOW_TO_FIX_URL = (
    "Check [state] url (TRACE_SCORER_STATE__URL): host, port, database and user, the password (in the URL "
    "from the environment, PGPASSWORD or ~/.pgpass), and that the server is running and reachable."
)


def scrub(text: str, url: str) -> str:
    """``text`` (from the driver or the server) without the URL's password, in one line."""
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.Error:
        password = None
    if password:
        text = text.replace(str(password), REDACTED)
    return " ".join(redact_text(text).split())


def connection_defaults(given: dict[str, Any]) -> dict[str, str | int]:
    """What a state connection sets that the URL (as ``conninfo_to_dict``) does not: the connect timeout,
    the application name, TCP keepalives (:data:`TCP_DEFAULTS`)."""
    defaults: dict[str, str | int] = {
        "connect_timeout": CONNECT_TIMEOUT,
        "application_name": APPLICATION_NAME,
        **TCP_DEFAULTS,
    }
    return {k: v for k, v in defaults.items() if k not in given}


def shown_url(url: str) -> str:
    """``url`` as it may be printed and logged: the user kept, the password (userinfo or query) dropped."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{host}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class _Watchdog:
    """Cuts a connection whose call overran its deadline: one daemon thread per backend, armed around each
    call (a lock and a notify, no thread started per call). Shutting the socket down wakes the call, which
    fails as on a lost connection; psycopg marks the connection broken and the next call reconnects."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: tuple[float, int] | None = None  # (monotonic deadline, socket fd)
        self._closed = False
        self.fired = False
        self._thread = threading.Thread(target=self._watch, name="state-deadline", daemon=True)
        self._thread.start()

    def arm(self, fd: int, seconds: float) -> None:
        with self._cond:
            self._armed = (time.monotonic() + seconds, fd)
            self.fired = False
            self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching; True when the deadline had passed (the connection was cut)."""
        with self._cond:
            self._armed = None
            return self.fired

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._closed:
                if self._armed is None:
                    self._cond.wait()
                    continue
                deadline, fd = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._armed = None
                self.fired = True
                with contextlib.suppress(OSError):  # the call may have just ended and the socket closed
                    cut = socket.socket(fileno=os.dup(fd))
                    try:
                        cut.shutdown(socket.SHUT_RDWR)
                    finally:
                        cut.close()


def _placeholders(query: str) -> str:
    """The store's ``?`` placeholders as psycopg's ``%s`` (the store's SQL has no ``?`` or ``%`` else)."""
    return query.replace("?", "%s")


class PostgresBackend:
    """The state in schema ``schema`` of the PostgreSQL database at ``url``.

    ``dry_run``: connect, read the version, run the migration and the write probe, then roll back: the
    database is left as it was (``trace-scorer check``). ``deadline``: seconds a call may wait for the
    server (the worker: :data:`CALL_DEADLINE`); None waits as long as it takes.
    """

    def __init__(
        self, url: str, schema: str = "trace_scorer", *, dry_run: bool = False, deadline: float | None = None
    ) -> None:
        if not SCHEMA_NAME.match(schema):
            raise ValueError(f"{schema!r} is not a schema name this store uses (lower-case letters, digits, _)")
        self.url = url
        self.schema = schema
        self.description = f"PostgreSQL {shown_url(url)} (schema {schema})"
        self.found_version = 0
        self._version = 0
        self._in_transaction = False
        #: Seconds a call may wait for the server (None: no limit, e.g. ``state import``'s long statements).
        self.deadline = deadline
        self._watchdog = _Watchdog()
        try:
            self._conn = self._connect()
        except BaseException:
            self._watchdog.close()
            raise
        try:
            self._open(dry_run=dry_run)
        except psycopg.Error as exc:
            self.close()
            raise self._explain(exc) from None
        except BaseException:
            self.close()
            raise

    # -- opening ------------------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Row]:
        try:
            given = conninfo_to_dict(self.url)
            conninfo = make_conninfo(self.url, **connection_defaults(given))
            conn = psycopg.connect(conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StateError(
                f"cannot connect to the PostgreSQL state at [state] url = {shown_url(self.url)} "
                f"({scrub(str(exc), self.url)}). {_HOW_TO_FIX_URL}"
            ) from None
        try:
            # Unqualified names in the store's SQL are this schema's; the session's times are UTC.
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            conn.execute("SET TIME ZONE 'UTC'")
            if self.deadline is not None:  # the server ends what runs longer than a call may wait (lock waits too)
                conn.execute(f"SET statement_timeout = {round(self.deadline * 1000)}")
        except psycopg.Error as exc:
            conn.close()
            raise self._explain(exc) from None
        return conn

    def _open(self, *, dry_run: bool) -> None:
        conn = self._conn
        with conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")  # replicas starting together wait for one migration
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ADVISORY_LOCK_CLASS, self.schema))
            self.found_version = self._read_version()
            if self.found_version > SCHEMA_VERSION:
                raise StateError(
                    f"the state in {self.description} has schema version {self.found_version}, newer than this "
                    f"release of trace-scorer knows (up to {SCHEMA_VERSION}): it was written by a newer release. "
                    "Run that release (or a later one) on it, or set [state] db_schema to another schema."
                )
            if self.found_version == 0:
                self._refuse_foreign_tables()
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version"
                    " (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version INTEGER NOT NULL)"
                )
                conn.execute("INSERT INTO schema_version (version) VALUES (0) ON CONFLICT DO NOTHING")
            for step in range(self.found_version, SCHEMA_VERSION):
                conn.execute(MIGRATIONS[step].postgres)
            # Also the write probe: a read-only server or user is found now, not mid-tick.
            conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
            if dry_run:
                raise psycopg.Rollback()  # leaves the transaction, undoing it
        self._version = self.found_version if dry_run else SCHEMA_VERSION

    def _tables(self, names: Sequence[str]) -> list[str]:
        """Which of these tables exist in the schema."""
        rows = self._conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename = ANY(%s) ORDER BY tablename",
            (self.schema, list(names)),
        ).fetchall()
        return [r[0] for r in rows]

    def _read_version(self) -> int:
        if not self._tables(["schema_version"]):
            return 0
        row = self._conn.execute("SELECT version FROM schema_version").fetchone()
        return 0 if row is None else int(row[0])

    def _refuse_foreign_tables(self) -> None:
        """A schema without our version row but with tables of our names holds someone else's tables."""
        found = self._tables([t.name for t in TABLES])
        if found:
            raise StateError(
                f"{self.description} already has tables named {', '.join(found)} that trace-scorer did not "
                "create (no schema_version table): set [state] db_schema to a schema of its own."
            )

    def _explain(self, exc: psycopg.Error) -> StateError:
        """A driver error while opening as what the user can do about it."""
        detail = scrub(f"{type(exc).__name__}: {exc}", self.url)
        if isinstance(exc, pg_errors.InsufficientPrivilege):
            return StateError(
                f"the PostgreSQL user cannot create or write the state's tables in {self.description} "
                f"({detail}): grant it CREATE on the database (or create the schema {self.schema} owned by "
                "it), or use another user in [state] url."
            )
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            return StateError(
                f"{self.description} is read-only ({detail}): point [state] url at the primary (read-write) server."
            )
        if isinstance(exc, psycopg.OperationalError):
            return StateError(f"lost the connection to {self.description} ([state] url) ({detail}). {_HOW_TO_FIX_URL}")
        return StateError(f"cannot open the state in {self.description} ({detail}).")

    # -- what the store runs ------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        return self._version

    def _connection(self) -> psycopg.Connection[Row]:
        if self._conn.broken or self._conn.closed:  # the server went away: the call that found out failed
            if self._in_transaction:  # never carry on a transaction's statements on a new connection
                raise psycopg.OperationalError(f"the connection to {self.description} was lost mid-transaction")
            self._conn.close()
            self._conn = self._connect()
        return self._conn

    def _bounded(self, call: Callable[[psycopg.Connection[Row]], T]) -> T:
        """``call(connection)`` cut after :attr:`deadline` seconds without an answer (a :class:`StateError`)."""
        conn = self._connection()
        if self.deadline is None:
            return call(conn)
        self._watchdog.arm(conn.fileno(), self.deadline)
        try:
            result = call(conn)
        except psycopg.OperationalError:
            if self._watchdog.disarm():
                raise StateError(
                    f"{self.description} did not answer within {self.deadline:g} s (a frozen server or a network "
                    "dropping packets): the connection was cut and the next call reconnects."
                ) from None
            raise
        if self._watchdog.disarm():  # the answer came as the deadline passed: the socket is cut, replace it
            conn.close()
        return result

    max_members = 10_000  # one array parameter; bounded only to keep one answer's size in check

    def member_of(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        return "= ANY(?)", (list(values),)

    def fetch(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._bounded(lambda conn: conn.execute(_placeholders(query), params).fetchall())

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self._bounded(lambda conn: conn.execute(_placeholders(query), params))

    def execute_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:

            def many(conn: psycopg.Connection[Row]) -> None:
                with conn.cursor() as cursor:
                    cursor.executemany(_placeholders(query), rows)

            self._bounded(many)

    def stream(self, query: str, size: int) -> Iterator[list[Row]]:
        # A server-side cursor (it lives in a transaction): the rows arrive ``size`` at a time.
        conn = self._connection()
        with conn.transaction(), conn.cursor(name="trace_scorer_export") as cursor:
            cursor.execute(_placeholders(query))
            while rows := cursor.fetchmany(size):
                yield rows

    def bulk_insert(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        with self._connection().cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row(row)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        # BEGIN and COMMIT sent as statements (the connection is in autocommit), each under the deadline.
        self._bounded(lambda conn: conn.execute("BEGIN"))
        self._in_transaction = True
        try:
            yield
        except BaseException:
            self._in_transaction = False
            if not (self._conn.broken or self._conn.closed):
                with contextlib.suppress(psycopg.Error, StateError):  # the error in hand is the one to report
                    self._bounded(lambda conn: conn.execute("ROLLBACK"))
            raise
        self._in_transaction = False
        self._bounded(lambda conn: conn.execute("COMMIT"))

    def retrying(self, work: Callable[[], T]) -> T:
        # The waits (tens of milliseconds, rare) block the caller's thread, as every call of the store does.
        for attempt in Retrying(
            retry=retry_if_exception_type(_CONFLICTS),
            stop=stop_after_attempt(CONFLICT_ATTEMPTS),
            wait=backoff(0.01, 0.5, jitter=0.02),
            before_sleep=lambda s: log.info(
                "state_conflict_retried",
                attempt=s.attempt_number,
                error=type(s.outcome.exception()).__name__ if s.outcome else None,
            ),
            reraise=True,
        ):
            with attempt:
                return work()
        raise AssertionError("unreachable: tenacity re-raises the last failure")  # pragma: no cover

    def lock_tables(self, names: Sequence[str]) -> None:
        self._connection().execute(  # waits for the other writers as long as they take (state import)
            sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(sql.SQL(", ").join(map(sql.Identifier, names)))
        )

    def time_param(self, moment: datetime) -> datetime:
        return moment.astimezone(UTC)

    def time_value(self, raw: Any) -> datetime | None:
        if raw is None:
            return None
        if not isinstance(raw, datetime):
            raise TypeError(f"expected a timestamptz, got {type(raw).__name__}")
        return raw.astimezone(UTC)

    def close(self) -> None:
        self._watchdog.close()
        self._conn.close()

"""The state's tables on both backends: the migration steps, the version they lead to, and the columns
``trace-scorer state import`` copies.

One list of steps serves SQLite and PostgreSQL. A step whose SQL both accept is written once
(:meth:`Migration.shared`); where they differ it has a variant per backend. The difference so far: times
are ISO 8601 text in SQLite (the file's format since the first release) and ``timestamptz`` in
PostgreSQL, where they are compared and read by people with ``psql``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    """One schema step: the SQL that brings a state from version ``i`` to ``i + 1`` on each backend."""

    sqlite: str
    postgres: str

    @classmethod
    def shared(cls, sql: str) -> Migration:
        return cls(sqlite=sql, postgres=sql)


_SQLITE_V1 = """
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

_POSTGRES_V1 = """
CREATE TABLE IF NOT EXISTS watermarks (
    target TEXT PRIMARY KEY,
    value  TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    target      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    scored_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (target, subject)
);
CREATE TABLE IF NOT EXISTS failures (
    target     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    tries      INTEGER NOT NULL,
    next_try   TIMESTAMPTZ,     -- NULL: given up
    last_error TEXT NOT NULL,
    payload    TEXT,            -- what is needed to fetch the subject again (JSON)
    PRIMARY KEY (target, subject)
);
CREATE TABLE IF NOT EXISTS runs (
    target       TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    first_seen   TIMESTAMPTZ NOT NULL,
    item_count   INTEGER NOT NULL DEFAULT 0,
    last_change  TIMESTAMPTZ,
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

#: The fleet's tables (PostgreSQL only: distributed mode): the planned windows and their batches
#: (``trace_scorer.distributed.windows``), the slots of the shared request budgets
#: (``trace_scorer.distributed.rates``). Transient: ``state import`` has nothing to copy into them.
_POSTGRES_V3_FLEET = """
CREATE TABLE IF NOT EXISTS fleet_windows (
    target       TEXT PRIMARY KEY,          -- one open window per target
    window_id    TEXT NOT NULL,
    window_start TIMESTAMPTZ NOT NULL,
    hold         TIMESTAMPTZ NOT NULL,      -- where the watermark moves once every batch settled
    batches      INTEGER NOT NULL,
    complete     BOOLEAN NOT NULL,
    planned_at   TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS fleet_batches (
    target    TEXT NOT NULL,
    window_id TEXT NOT NULL,
    batch_no  INTEGER NOT NULL,
    rows      TEXT NOT NULL,                -- JSON: the root rows of the batch's traces
    retry     BOOLEAN NOT NULL,
    settled   BOOLEAN NOT NULL,
    PRIMARY KEY (target, window_id, batch_no)
);
CREATE TABLE IF NOT EXISTS fleet_rate_slots (
    key        TEXT NOT NULL,
    slot       INTEGER NOT NULL,
    granted_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (key, slot)
);
"""

#: Schema migrations: step ``i`` brings a state from version ``i`` to ``i + 1``. Add a step at the end for
#: every schema change (and its columns to :data:`TABLES`); never edit a released one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(sqlite=_SQLITE_V1, postgres=_POSTGRES_V1),
    # 2: why a subject was done without scores (e.g. a trace over the row cap); NULL = scored.
    Migration.shared("ALTER TABLE ledger ADD COLUMN reason TEXT;"),
    # 3: distributed mode's tables (nothing on SQLite, which a fleet never uses).
    Migration(sqlite="", postgres=_POSTGRES_V3_FLEET),
)
#: The schema version this release writes; a state with a higher one is refused.
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class Table:
    """A state table as of :data:`SCHEMA_VERSION`: its columns, and which of them hold times."""

    name: str
    columns: tuple[str, ...]
    times: frozenset[str] = frozenset()


#: Every table of the current schema, in an order that copies them (``trace-scorer state import``).
TABLES: tuple[Table, ...] = (
    Table("watermarks", ("target", "value"), frozenset({"value"})),
    Table("ledger", ("target", "subject", "config_hash", "scored_at", "reason"), frozenset({"scored_at"})),
    Table("failures", ("target", "subject", "tries", "next_try", "last_error", "payload"), frozenset({"next_try"})),
    Table(
        "runs",
        ("target", "run_id", "first_seen", "item_count", "last_change", "posted_hash"),
        frozenset({"first_seen", "last_change"}),
    ),
    Table("run_results", ("target", "run_id", "subject", "item_id", "outcomes")),
)

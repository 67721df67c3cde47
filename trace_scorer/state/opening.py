"""Opening the configured state: :func:`open_state` picks the backend from ``[state]``, and
:func:`check_state` says whether it can be used without changing it (``trace-scorer check``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import structlog

from trace_scorer.config.state import StateSettings
from trace_scorer.state.backend import Backend, StateError, StateInUse
from trace_scorer.state.schema import SCHEMA_VERSION
from trace_scorer.state.sqlite import SqliteBackend
from trace_scorer.state.store import StateStore

log = structlog.get_logger(__name__)


def _backend(settings: StateSettings, *, dry_run: bool, deadline: float | None = None) -> Backend:
    url = settings.postgres_url
    if url is None:
        return SqliteBackend(settings.path, dry_run=dry_run)
    from trace_scorer.state.postgres import PostgresBackend  # deferred: only a configured url loads psycopg

    return PostgresBackend(url, settings.db_schema, dry_run=dry_run, deadline=deadline)


def open_state(settings: StateSettings, *, deadline: float | None = None) -> StateStore:
    """The configured state, brought to the current schema. Raises :class:`StateError` (exit 2) naming
    the file or ``[state] url`` and the fix when it cannot be used. ``deadline``: on PostgreSQL, seconds a
    call may wait for the server (the worker's event loop waits meanwhile); None: as long as it takes."""
    store = StateStore(_backend(settings, dry_run=False, deadline=deadline))
    log.info(
        "state_opened",
        state=store.description,
        schema_version=store.schema_version,
        migrated_from=store.found_version if store.found_version != store.schema_version else None,
    )
    return store


@dataclass(frozen=True)
class StateCheck:
    """What ``trace-scorer check`` says of the state."""

    description: str
    ok: bool
    detail: str


def check_state(settings: StateSettings) -> StateCheck:
    """Whether the configured state can be used: reachable, not damaged, its schema current or migratable,
    writable. Runs the migration and a write and rolls them back, so the state is left as it was."""
    if settings.postgres_url is None:
        path = Path(settings.path).absolute()
        description = f"SQLite file {path}"
        if not path.exists():
            return StateCheck(description, True, f"not created yet: a new state (schema version {SCHEMA_VERSION})")
    else:
        from trace_scorer.state.postgres import shown_url

        description = f"PostgreSQL {shown_url(settings.postgres_url)} (schema {settings.db_schema})"
    try:
        backend = _backend(settings, dry_run=True)
    except StateInUse as exc:
        # The running worker holds it, as it should: what could be checked without it is not checked.
        return StateCheck(description, True, f"in use: {exc}")
    except StateError as exc:
        return StateCheck(description, False, str(exc))
    try:
        found = backend.found_version
        if found == SCHEMA_VERSION:
            detail = f"schema version {found} (current), writable"
        elif found == 0 and settings.postgres_url is not None:
            detail = f"empty: the tables are created at the first start (schema version {SCHEMA_VERSION}), writable"
        else:
            detail = (
                f"schema version {found}: migrated to {SCHEMA_VERSION} at the next start (or by "
                "trace-scorer state migrate), writable"
            )
        return StateCheck(backend.description, True, detail)
    finally:
        backend.close()

"""``trace-scorer state migrate`` (bring the configured state to this release's schema) and
``trace-scorer state import SQLITE_FILE`` (move a worker's SQLite state into the configured PostgreSQL
state, so a fleet of replicas goes on where the single worker stopped: nothing re-scored, nothing
re-posted)."""

from __future__ import annotations

import time
from pathlib import Path

from trace_scorer.config.state import StateSettings
from trace_scorer.errors import UserError
from trace_scorer.state.opening import open_state
from trace_scorer.state.store import StateStore
from trace_scorer.state.transfer import copy_state


def run_migrate(settings: StateSettings) -> int:
    """Open the configured state (which migrates it) and say from which version to which."""
    store = open_state(settings)
    try:
        if store.found_version == store.schema_version:
            print(f"state {store.description}: schema version {store.schema_version}, already current")
        else:
            print(f"state {store.description}: schema version {store.found_version} → {store.schema_version}")
    finally:
        store.close()
    return 0


def run_import(settings: StateSettings, source_file: Path, *, replace: bool) -> int:
    """Copy the SQLite state at ``source_file`` into the configured PostgreSQL state, in one transaction."""
    if settings.postgres_url is None:
        raise UserError(
            "state import copies an SQLite state into PostgreSQL: set [state] url (or TRACE_SCORER_STATE__URL) "
            "to the PostgreSQL state first"
        )
    if not source_file.is_file():
        raise UserError(f"state import: {source_file}: no such file (the SQLite state to import)")
    source = StateStore(source_file)  # locked: a worker still running on it is refused, not copied mid-write
    try:
        target = open_state(settings)
        try:
            started = time.monotonic()
            counts = copy_state(source, target, replace=replace)
            seconds = time.monotonic() - started
        finally:
            target.close()
    finally:
        source.close()
    copied = ", ".join(f"{name} {count}" for name, count in counts.items())
    print(f"imported {source.description} into {target.description} in {seconds:.1f}s: {copied} rows")
    return 0

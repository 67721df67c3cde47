"""Copying one state into another in one transaction (``trace-scorer state import``): every table of the
current schema, row for row, times converted between the backends' columns — nothing re-scored, nothing
re-posted, since the ledger and the watermarks arrive as they were."""

from __future__ import annotations

from trace_scorer.state.backend import StateError
from trace_scorer.state.schema import TABLES
from trace_scorer.state.store import StateStore


def copy_state(source: StateStore, target: StateStore, *, replace: bool = False) -> dict[str, int]:
    """Copy every row of ``source`` into ``target``; returns the rows copied per table.

    A ``target`` that holds rows is refused (two states mixed would hold two watermarks for one target and
    a ledger of which neither is the truth) unless ``replace``: then its rows are deleted first, in the same
    transaction. Other writers are kept out of ``target`` until the copy is committed.
    """
    counts: dict[str, int] = {}
    with target.transaction():
        target.lock_for_import()
        present = {name: count for name, count in target.row_counts().items() if count}
        if present and not replace:
            held = ", ".join(f"{name} {count}" for name, count in present.items())
            raise StateError(
                f"{target.description} already holds a state ({held} rows): importing into it would mix two "
                "states. Import into an empty one, or pass --force to replace what it holds."
            )
        for table in TABLES:
            target.delete_rows(table)
            counts[table.name] = 0
            for chunk in source.export_rows(table):
                target.insert_rows(table, chunk)
                counts[table.name] += len(chunk)
    return counts

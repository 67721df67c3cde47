"""The windows a fleet has planned and the batches they were cut into, in PostgreSQL.

A target has at most one open window. The planner (one replica, under the target's queue lock) records
the window — its start, how far the watermark may move once it is done (``hold``) and its batches, each
with the roots to score — in one transaction, then defers one job per batch. Any replica runs a batch;
when it is done, it settles the batch under a lock of the window's row, and the batch that settles last
marks the window complete. The watermark then moves to ``hold`` and the window is removed.

Every step can be interrupted (``kill -9``) and picked up again: a batch job whose replica died is
retried by the queue (the ledger drops what it had already scored); a batch with no job (the planner
died while deferring) is deferred again by the next plan; a window complete but not yet removed is
finished by the next plan (moving a watermark to the same ``hold`` twice is harmless).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

#: The tables (created by the PostgreSQL state's migrations, ``trace_scorer.state.schema``).
WINDOWS_TABLE = "fleet_windows"
BATCHES_TABLE = "fleet_batches"


@dataclass(frozen=True)
class OpenWindow:
    target: str
    window_id: str
    start: datetime
    hold: datetime
    complete: bool
    #: Numbers of the batches not settled yet.
    unsettled: tuple[int, ...]


@dataclass(frozen=True)
class PlannedBatch:
    """One batch of a window: the root rows of its traces (as the retry path keeps them)."""

    rows: list[dict[str, Any]]
    retry: bool = False


class WindowBook:
    """The planned windows of every target, shared by the replicas."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def open_window(self, target: str) -> OpenWindow | None:
        async with self.pool.connection() as db:
            row = await (
                await db.execute(
                    f"SELECT window_id, window_start, hold, complete FROM {WINDOWS_TABLE} WHERE target = %s",
                    (target,),
                )
            ).fetchone()
            if row is None:
                return None
            unsettled = await (
                await db.execute(
                    f"SELECT batch_no FROM {BATCHES_TABLE} WHERE target = %s AND window_id = %s AND NOT settled "
                    "ORDER BY batch_no",
                    (target, row[0]),
                )
            ).fetchall()
        return OpenWindow(target, row[0], row[1], row[2], row[3], tuple(r[0] for r in unsettled))

    async def plan(
        self, target: str, window_id: str, start: datetime, hold: datetime, batches: Sequence[PlannedBatch]
    ) -> bool:
        """Record a window and its batches; False when the target already has an open window (another
        planner was first)."""
        async with self.pool.connection() as db, db.transaction():
            inserted = await db.execute(
                f"INSERT INTO {WINDOWS_TABLE} (target, window_id, window_start, hold, batches, complete, planned_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp()) ON CONFLICT (target) DO NOTHING",
                (target, window_id, start, hold, len(batches), not batches),
            )
            if inserted.rowcount == 0:
                return False
            async with db.cursor() as cursor:
                await cursor.executemany(
                    f"INSERT INTO {BATCHES_TABLE} (target, window_id, batch_no, rows, retry, settled) "
                    "VALUES (%s, %s, %s, %s, %s, false)",
                    [
                        (target, window_id, number, json.dumps(batch.rows, default=str), batch.retry)
                        for number, batch in enumerate(batches)
                    ],
                )
        return True

    async def batch(self, target: str, window_id: str, batch_no: int) -> tuple[PlannedBatch, bool] | None:
        """A batch and whether it is settled (None: its window is gone — finished, or planned again)."""
        async with self.pool.connection() as db:
            row = await (
                await db.execute(
                    f"SELECT rows, retry, settled FROM {BATCHES_TABLE} "
                    "WHERE target = %s AND window_id = %s AND batch_no = %s",
                    (target, window_id, batch_no),
                )
            ).fetchone()
        if row is None:
            return None
        return PlannedBatch(json.loads(row[0]), bool(row[1])), bool(row[2])

    async def settle(self, target: str, window_id: str, batch_no: int) -> datetime | None:
        """Mark a batch done; the window's ``hold`` when it was the last one (the window is now complete),
        else None."""
        async with self.pool.connection() as db, db.transaction():
            window = await (
                await db.execute(
                    f"SELECT complete, hold FROM {WINDOWS_TABLE} WHERE target = %s AND window_id = %s FOR UPDATE",
                    (target, window_id),
                )
            ).fetchone()
            if window is None or window[0]:
                return None
            await db.execute(
                f"UPDATE {BATCHES_TABLE} SET settled = true WHERE target = %s AND window_id = %s AND batch_no = %s",
                (target, window_id, batch_no),
            )
            left = await (
                await db.execute(
                    f"SELECT count(*) FROM {BATCHES_TABLE} WHERE target = %s AND window_id = %s AND NOT settled",
                    (target, window_id),
                )
            ).fetchone()
            if left is None or left[0] != 0:
                return None
            await db.execute(
                f"UPDATE {WINDOWS_TABLE} SET complete = true WHERE target = %s AND window_id = %s",
                (target, window_id),
            )
            hold: datetime = window[1]
            return hold

    async def remove(self, target: str, window_id: str) -> None:
        """Forget a complete window (after its watermark moved)."""
        async with self.pool.connection() as db, db.transaction():
            await db.execute(f"DELETE FROM {BATCHES_TABLE} WHERE target = %s AND window_id = %s", (target, window_id))
            await db.execute(f"DELETE FROM {WINDOWS_TABLE} WHERE target = %s AND window_id = %s", (target, window_id))

"""The planned windows of a fleet: one open window per target, and exactly one batch completes it however
many replicas settle batches at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from trace_scorer.distributed.windows import PlannedBatch, WindowBook

START = datetime(2026, 11, 1, 12, tzinfo=UTC)
HOLD = START + timedelta(minutes=5)


def batches(count: int) -> list[PlannedBatch]:
    return [PlannedBatch([{"id": f"root-{n}", "traceId": f"trace-{n}"}]) for n in range(count)]


async def test_a_target_has_one_open_window(fleet_pool: AsyncConnectionPool) -> None:
    book = WindowBook(fleet_pool)
    assert await book.plan("prod", "w1", START, HOLD, batches(3))
    assert not await book.plan("prod", "w2", START, HOLD, batches(1))  # another planner was first
    assert await book.plan("other", "w1", START, HOLD, batches(1))  # targets are independent
    window = await book.open_window("prod")
    assert window is not None
    assert (window.window_id, window.start, window.hold, window.complete) == ("w1", START, HOLD, False)
    assert window.unsettled == (0, 1, 2)
    found = await book.batch("prod", "w1", 1)
    assert found == (PlannedBatch([{"id": "root-1", "traceId": "trace-1"}]), False)


async def test_exactly_one_settle_completes_the_window_under_concurrency(fleet_pool: AsyncConnectionPool) -> None:
    book = WindowBook(fleet_pool)
    await book.plan("prod", "w1", START, HOLD, batches(6))
    completed = await asyncio.gather(*(book.settle("prod", "w1", n) for n in range(6)))
    assert [hold for hold in completed if hold is not None] == [HOLD]  # exactly one, with the window's hold
    window = await book.open_window("prod")
    assert window is not None and window.complete and window.unsettled == ()
    assert await book.settle("prod", "w1", 0) is None  # settling again (a retried job) changes nothing
    await book.remove("prod", "w1")
    assert await book.open_window("prod") is None
    assert await book.batch("prod", "w1", 0) is None  # a late attempt finds the window gone


async def test_a_window_with_nothing_to_score_is_complete_at_once(fleet_pool: AsyncConnectionPool) -> None:
    book = WindowBook(fleet_pool)
    await book.plan("prod", "w1", START, HOLD, [])
    window = await book.open_window("prod")
    assert window is not None and window.complete

"""Budgets shared by replicas: never more than ``limit`` grants in any ``period``, whoever asks."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from datetime import datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from trace_scorer.distributed.rates import SharedRateLimit, SharedRates

PROCESS = """
import asyncio, sys
from psycopg_pool import AsyncConnectionPool
from trace_scorer.distributed.rates import SharedRateLimit

async def main(url, schema, count):
    async with AsyncConnectionPool(url, min_size=1, max_size=4, kwargs={"autocommit": True,
            "options": f"-c search_path={schema}"}) as pool:
        gate = SharedRateLimit(pool, "langfuse", limit=5, period=0.5)
        async def one():
            print((await gate.acquire_at()).isoformat(), flush=True)
        await asyncio.gather(*(one() for _ in range(count)))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def most_in_any_window(times: list[datetime], period: float) -> int:
    ordered = sorted(times)
    width = timedelta(seconds=period)
    return max(sum(1 for t in ordered[i:] if t - start < width) for i, start in enumerate(ordered))


def test_three_processes_never_exceed_the_budget_together(
    fleet_pool: AsyncConnectionPool, postgres_url: str, postgres_schema: str
) -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS, postgres_url, postgres_schema, "12"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0, 0]
    granted = [datetime.fromisoformat(line) for out in outputs for line in out.split()]
    assert len(granted) == 36  # every request got its turn in the end
    # 36 requests asked for at once, 5 per 0.5 s: never more than 5 in any half second, fleet-wide.
    assert most_in_any_window(granted, 0.5) == 5


async def test_a_lower_limit_shrinks_the_ring(fleet_pool: AsyncConnectionPool) -> None:
    """A configuration change (limit 8 → 2) leaves exactly 2 slots: 2 grants, then the third waits."""
    big = SharedRateLimit(fleet_pool, "provider:x", limit=8, period=60.0)
    await big.acquire()
    small = SharedRateLimit(fleet_pool, "provider:x", limit=2, period=60.0)
    slept: list[float] = []

    async def no_sleep(seconds: float) -> None:
        slept.append(seconds)
        raise asyncio.CancelledError  # stop at the first wait: we only need to know it had to wait

    small.sleep = no_sleep
    await small.acquire()  # the second slot (the first is taken by big's grant)
    with contextlib.suppress(asyncio.CancelledError):
        await small.acquire()
    assert len(slept) == 1 and 59 < slept[0] <= 60.6  # the oldest grant frees a slot a minute later
    async with fleet_pool.connection() as db:
        slots = await (await db.execute("SELECT count(*) FROM fleet_rate_slots WHERE key = 'provider:x'")).fetchone()
    assert slots is not None and slots[0] == 2


def test_per_minute_spreads_like_the_single_process_limiter(fleet_pool: AsyncConnectionPool) -> None:
    rates = SharedRates(fleet_pool)
    fast, slow = rates.per_minute("a", 600), rates.per_minute("b", 30)
    assert (fast.limit, fast.period) == (10, 1.0)  # 600/min: 10 in any second, as aiolimiter spreads it
    assert (slow.limit, slow.period) == (1, 2.0)  # 30/min: one every 2 s

"""Request budgets shared by every replica: at most ``limit`` requests in any ``period``, fleet-wide.

Langfuse counts requests per organisation and an LLM provider per API key, so ``requests_per_minute``
must hold for all replicas together, not per process. Each budget is a ring of ``limit`` slots in
PostgreSQL, each holding the time of its last grant. A request takes the oldest slot whose grant is at
least ``period`` (plus a margin) old and stamps it with the database's clock, in one statement: every
slot's grants are then at least a period apart, so no window of ``period`` seconds holds more than
``limit`` grants — the same sliding-log guarantee as the single-process ``RequestBudget``, and so also
within Langfuse Cloud's fixed windows. No slot free: wait until the oldest one frees up.

Hand-written because no well-kept library offers a PostgreSQL-backed limiter for asyncio (the limiters
on PyPI are in-process, or Redis-based — a second service we would have to run); the queue's
procrastinate has none. One database round trip per request: a few hundred per second on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

#: The slots of every budget (created by the PostgreSQL state's migrations, ``trace_scorer.state.schema``).
SLOTS_TABLE = "fleet_rate_slots"

_TAKE = f"""
WITH oldest AS (
    SELECT slot FROM {SLOTS_TABLE}
    WHERE key = %(key)s AND granted_at <= clock_timestamp() - make_interval(secs => %(period)s)
    ORDER BY granted_at, slot
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE {SLOTS_TABLE} AS s SET granted_at = clock_timestamp()
FROM oldest WHERE s.key = %(key)s AND s.slot = oldest.slot
RETURNING s.granted_at
"""

#: When the oldest slot frees up, in seconds from now. A slot still at '-infinity' (never granted) but
#: locked by another process's grant in flight makes it -Infinity: try again at once.
_NEXT_FREE = f"""
SELECT extract(epoch FROM min(granted_at)) + %(period)s - extract(epoch FROM clock_timestamp())
FROM {SLOTS_TABLE} WHERE key = %(key)s
"""

_ADD_SLOTS = f"""
INSERT INTO {SLOTS_TABLE} (key, slot, granted_at)
SELECT %(key)s, n, '-infinity' FROM generate_series(1, %(limit)s) AS n
ON CONFLICT (key, slot) DO NOTHING
"""
_DROP_SLOTS = f"DELETE FROM {SLOTS_TABLE} WHERE key = %(key)s AND slot > %(limit)s"


@dataclass
class SharedRateLimit:
    """At most ``limit`` acquisitions in any ``period`` seconds by all processes sharing ``key``."""

    pool: AsyncConnectionPool
    key: str
    limit: int
    period: float
    #: Added to ``period`` before a slot is reused (default: 1 % of it): a request is sent a little after
    #: its grant (the round trip back), so one slot's grants must be a little more than a period apart.
    margin: float | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    #: Seconds spent waiting for a slot, in all (exported as the budget's wait).
    waited: float = 0.0
    _ready: bool = False

    async def _ensure_slots(self) -> None:
        """The ring has exactly ``limit`` slots (a configuration change resizes it)."""
        async with self.pool.connection() as db:
            await db.execute(_ADD_SLOTS, {"key": self.key, "limit": self.limit})
            await db.execute(_DROP_SLOTS, {"key": self.key, "limit": self.limit})
        self._ready = True

    async def acquire(self) -> None:
        """Wait until one more request fits in the fleet's budget, and book it."""
        await self.acquire_at()

    async def acquire_at(self) -> datetime:
        """:meth:`acquire`, returning when the grant was booked (the database's clock)."""
        if not self._ready:
            await self._ensure_slots()
        margin = self.period / 100 if self.margin is None else self.margin
        params = {"key": self.key, "period": self.period + margin}
        while True:
            async with self.pool.connection() as db:
                taken = await (await db.execute(_TAKE, params)).fetchone()
                if taken is not None:
                    granted: datetime = taken[0]
                    return granted
                row = await (await db.execute(_NEXT_FREE, params)).fetchone()
            wait = max(0.01, float(row[0]) if row and row[0] is not None else 0.05)
            self.waited += wait
            await self.sleep(wait)


@dataclass
class SharedRates:
    """Budgets by name on one database: ``gate("langfuse", 60, 60.0)``."""

    pool: AsyncConnectionPool

    def gate(self, key: str, limit: int, period: float) -> SharedRateLimit:
        return SharedRateLimit(self.pool, key, limit, period)

    def per_minute(self, key: str, requests_per_minute: float) -> SharedRateLimit:
        """A provider's ``requests_per_minute`` spread as aiolimiter spreads it in one process: per second
        from 60 a minute on (600/min → 10 in any second), else one per ``60 / rpm`` seconds."""
        if requests_per_minute >= 60:
            return self.gate(key, max(1, int(requests_per_minute // 60)), 1.0)
        return self.gate(key, 1, 60.0 / requests_per_minute)

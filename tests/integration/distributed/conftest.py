"""A connection pool on a schema of the test's own, with the state's tables (the fleet's included)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from psycopg_pool import AsyncConnectionPool

from trace_scorer.config.state import StateSettings
from trace_scorer.state import open_state


@pytest.fixture
async def fleet_pool(postgres_url: str, postgres_schema: str) -> AsyncIterator[AsyncConnectionPool]:
    open_state(StateSettings(url=postgres_url, db_schema=postgres_schema)).close()  # the schema, migrated
    pool = AsyncConnectionPool(
        postgres_url,
        min_size=1,
        max_size=8,
        open=False,
        kwargs={"options": f"-c search_path={postgres_schema}"},
    )
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()

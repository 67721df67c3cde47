"""Issue #22, item 1, in distributed mode: a replica whose wall clock stepped ahead plans no window past
what the Langfuse server showed, and a watermark already ahead is moved back once its window settles.

The plan and batch jobs are called as the queue calls them (on the fleet's PostgreSQL); the stand-in's
fake clock is the true time, the replica's wall clock is that plus two hours.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import timedelta

import pytest
import structlog
from procrastinate import App, PsycopgConnector
from psycopg_pool import AsyncConnectionPool
from pydantic import SecretStr

from tests.integration.worker.conftest import _registry_with_flaky  # noqa: F401  (the toy metric)
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import agent_trace, traces_target
from trace_scorer.config.settings import Settings
from trace_scorer.distributed.fleet import Fleet, ensure_queue_schema
from trace_scorer.distributed.windows import WindowBook
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.ops import Ops
from trace_scorer.worker.service import open_context

LAG = timedelta(minutes=2)
AHEAD = timedelta(hours=2)
#: The replica's wall clock less the true time (the stand-in's fake clock).
OFFSET = [AHEAD]


@pytest.fixture
async def fleet(
    postgres_url: str, postgres_schema: str, fleet_pool: AsyncConnectionPool, clock: FakeClock, v4: InProcessLangfuse
) -> AsyncIterator[Fleet]:
    """A replica on the stand-in whose wall clock is two hours ahead of the server's."""
    OFFSET[0] = AHEAD
    settings = Settings(
        langfuse={"base_url": BASE_URL, "public_key": PUBLIC, "secret_key": SecretStr(SECRET)},
        state={"url": postgres_url, "db_schema": postgres_schema},
        http={"enabled": False},
        targets=[traces_target()],
    )
    ensure_queue_schema(postgres_url, postgres_schema)
    async with AsyncExitStack() as stack:
        app = App(connector=PsycopgConnector())
        await app.open_async(fleet_pool)
        stack.push_async_callback(app.close_async)
        client = LangfuseClient(settings.langfuse, clock=clock)
        stack.push_async_callback(client.aclose)
        context = await open_context(settings, stack, ops=Ops.from_settings(settings.http), client=client)
        yield Fleet(context, app, WindowBook(fleet_pool), fleet_pool, clock=lambda: clock.now() + OFFSET[0])


async def plan_and_score(fleet: Fleet) -> None:
    """One plan job, then every batch job of the window it planned."""
    await fleet.plan(target="agent")
    window = await fleet.book.open_window("agent")
    if window is not None:
        for number in window.unsettled:
            await fleet.score_batch(target="agent", window_id=window.window_id, batch_no=number)


def scored_traces(v4: InProcessLangfuse) -> set[str]:
    return {s["traceId"] for s in v4.scores.values()}


async def test_a_replica_ahead_plans_no_window_past_the_servers_time(
    fleet: Fleet, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    v4.add_rows(*agent_trace("before", clock.now() - timedelta(minutes=30)))
    await plan_and_score(fleet)
    watermark = fleet.context.state.watermark("agent")
    assert scored_traces(v4) == {"before"}
    assert watermark is not None and watermark <= clock.now() - LAG, (watermark, clock.now())

    v4.add_rows(*agent_trace("after", clock.now() + timedelta(seconds=1)))
    clock.elapsed += 10 * 60
    await plan_and_score(fleet)
    assert scored_traces(v4) == {"before", "after"}


async def test_a_watermark_ahead_is_moved_back_when_its_window_settles(
    fleet: Fleet, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    fleet.context.state.set_watermark("agent", clock.now() + AHEAD)  # stored by a clock that was wrong
    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=20)))
    await plan_and_score(fleet)
    assert scored_traces(v4) == {"t1"}
    assert fleet.context.state.watermark("agent") == clock.now() - LAG



async def test_a_replica_counts_the_steps_of_its_clock(fleet: Fleet) -> None:
    await plan_and_score(fleet)
    OFFSET[0] = timedelta(0)  # NTP puts it right: a step back of two hours
    with structlog.testing.capture_logs() as logs:
        await plan_and_score(fleet)
    registry = fleet.context.ops.telemetry.registry
    assert registry.get_sample_value("trace_scorer_clock_steps_total", {"direction": "backward"}) == 1
    # The replica's monotonic clock is the real one: the jobs' own duration is in the figure.
    assert [e["seconds"] for e in logs if e["event"] == "clock_step"] == [pytest.approx(-7200, abs=60)]

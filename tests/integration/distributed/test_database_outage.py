"""A replica of a fleet through a database outage (issue #22 item 4), on a proxy the test cuts or freezes
(:mod:`tests.support.pg_proxy`) in front of the tests' PostgreSQL.

Before: stopping the database made procrastinate stop its worker and the replica exit 1 (every replica at
once) while ``/readyz`` said "ready"; a frozen database blocked the event loop, and the probes stopped
answering. What a user checks: the replica is still running after the outage and works again, ``/readyz``
said why it was not ready during it, and the probes answered while the database was frozen."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.pg_proxy import PgProxy, pg_proxy
from tests.support.worker import settings_for, traces_target
from trace_scorer.config.http import HttpSettings
from trace_scorer.config.state import StateSettings
from trace_scorer.distributed.fleet import Replica, start_replica
from trace_scorer.ops import Ops
from trace_scorer.state import StateError

pytestmark = pytest.mark.slow

#: How long a condition the test waits for may take before the test fails (a guard, never a pause).
GUARD = 180.0


async def until(condition: Callable[[], Any], what: str) -> None:
    """Wait for ``condition()`` (checked as the loop turns), failing after :data:`GUARD` seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + GUARD
    while not condition():
        assert loop.time() < end, f"still waiting for {what}"
        await asyncio.sleep(0.05)


async def get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """``GET path`` on the replica's ops server, served by the replica's own event loop."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body.startswith(b"{") else {}


class Probes:
    """The replica's ``/readyz`` asked again and again, its answers kept (with whether the proxy was frozen
    when each came)."""

    def __init__(self, port: int, proxy: PgProxy) -> None:
        self.port = port
        self.proxy = proxy
        self.answers: list[tuple[str, int, dict[str, Any], bool]] = []

    async def ask(self, path: str) -> tuple[int, dict[str, Any]]:
        status, body = await get(self.port, path)
        self.answers.append((path, status, body, self.proxy.frozen))
        return status, body


@pytest.fixture
async def replica(
    tmp_path: Path, v4: InProcessLangfuse, postgres_url: str, postgres_schema: str
) -> AsyncIterator[tuple[Replica, PgProxy, Ops, asyncio.Task[None]]]:
    with pg_proxy(postgres_url) as (proxy, url):
        target = traces_target(interval="1s", metrics=[{"metric": "rouge"}], kpis=[])
        settings = settings_for(tmp_path, target, worker={"jobs": 2, "stalled_after": "3s"})
        settings = settings.model_copy(
            update={
                "state": StateSettings(url=url, db_schema=postgres_schema),
                "http": HttpSettings(enabled=True, port=0),
            }
        )
        assert settings.state.postgres_url == url
        ops = Ops.from_settings(settings.http)
        await ops.start()
        stop = asyncio.Event()
        async with AsyncExitStack() as stack:
            started = await start_replica(settings, stack, ops, stop)
            started.check_every = 0.5
            started.restart_backoff = (0.2, 1.0)
            running = asyncio.create_task(started.run())
            try:
                yield started, proxy, ops, running
            finally:
                proxy.restore()
                stop.set()
                await asyncio.wait({running}, timeout=GUARD)
        await ops.stop()


async def test_a_replica_rides_out_a_restart_of_the_database_not_ready_meanwhile(
    replica: tuple[Replica, PgProxy, Ops, asyncio.Task[None]],
) -> None:
    fleet, proxy, ops, running = replica
    assert ops.server is not None
    probes = Probes(ops.server.port, proxy)
    with structlog.testing.capture_logs() as logs:
        await until(lambda: any(e["event"] == "plan" and e.get("ok") for e in logs), "a first plan job")
        assert (await probes.ask("/readyz"))[0] == 200

        proxy.cut()  # the database restarts: connections closed, new ones refused
        await until(lambda: any(e["event"] == "queue_worker_stopped" for e in logs), "procrastinate to stop")
        assert not running.done(), running  # before: RuntimeError, exit 1
        status, body = await probes.ask("/readyz")
        assert status == 503 and body["reason"].startswith("database:"), body
        assert (await probes.ask("/healthz"))[0] == 200

        proxy.restore()
        seen = len(logs)
        await until(lambda: any(e["event"] == "plan" and e.get("ok") for e in logs[seen:]), "a plan job after")
        await until(lambda: fleet.fleet.context.ops.health.readiness().ok, "ready again")
        assert (await probes.ask("/readyz"))[0] == 200
        assert not running.done()
    stopped = [e for e in logs if e["event"] == "queue_worker_stopped"]
    assert stopped and all("restart_in" in e for e in stopped)


async def test_the_probes_answer_while_the_database_is_frozen(
    replica: tuple[Replica, PgProxy, Ops, asyncio.Task[None]],
) -> None:
    fleet, proxy, ops, running = replica
    assert ops.server is not None
    probes = Probes(ops.server.port, proxy)
    with structlog.testing.capture_logs() as logs:
        await until(lambda: any(e["event"] == "plan" and e.get("ok") for e in logs), "a first plan job")
        proxy.freeze()  # SIGSTOP: nothing answers, nothing is refused
        # Only a guard: were the loop blocked for good (the store waiting on the frozen server), nothing
        # below would run again; the proxy thaws after GUARD seconds so the test fails instead of hanging.
        guard = threading.Timer(GUARD, proxy.restore)
        guard.start()
        try:
            seen = len(logs)
            # A job in hand reading the state when the database froze (procrastinate starts no new job then:
            # its own calls are asynchronous and wait).
            async def reading_state() -> None:
                async with fleet.fleet._job("agent", "batch"):
                    fleet.fleet.context.state.watermark("agent")

            in_hand = asyncio.create_task(reading_state())
            await until(lambda: any(e["event"] == "job_database_failed" for e in logs[seen:]), "the job to fail")
            assert isinstance((await asyncio.gather(in_hand, return_exceptions=True))[0], StateError)
            ready, body = await probes.ask("/readyz")
            alive, _ = await probes.ask("/healthz")
            assert proxy.frozen, "the probes answered only once the database was back"
            assert ready == 503 and body["reason"].startswith("database:"), body
            assert alive == 200
        finally:
            guard.cancel()
        proxy.restore()
        await until(lambda: fleet.fleet.context.ops.health.readiness().ok, "ready again")
        assert not running.done()

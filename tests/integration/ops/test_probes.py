"""What the probes say while the worker waits on Langfuse (issue #22, item 6): liveness holds while a read
trickles in or a retry waits (both are progress), fails when nothing moves; readiness says why the
worker cannot do its job, each reason a condition of its own.

The Langfuse client runs over an ``httpx.MockTransport`` whose answers the test releases piece by piece;
the health clock moves only when the test (or a retry's wait) moves it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx

from tests.support.clocks import FakeClock, ManualClock
from tests.support.deadlines import ManualDeadlines
from tests.support.langfuse_client import make_settings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.langfuse.http.endpoints import HEALTH
from trace_scorer.ops import Health, Ops, Telemetry
from trace_scorer.runtime import progress

TARGET = "production"
ANSWER = b'{"status": "OK", "version": "4.60.0"}'


class Paced(httpx.AsyncByteStream):
    """A body sent a piece at a time, each when the test puts it in ``pieces`` (None ends it); ``asked``
    gets an item each time the reader is ready for the next piece (the previous one was handed on)."""

    def __init__(self) -> None:
        self.pieces: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.asked: asyncio.Queue[None] = asyncio.Queue()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.asked.put_nowait(None)
            piece = await self.pieces.get()
            if piece is None:
                return
            yield piece


class SleepMovesHealth(FakeClock):
    """The client's clock: a retry's wait returns at once, having moved the health clock by as much, and
    records what the probes said at its end (the moment before the next attempt)."""

    def __init__(self, health_clock: ManualClock, ops: Ops) -> None:
        super().__init__()
        self.health_clock = health_clock
        self.ops = ops
        self.seen: list[tuple[bool, str, bool, str]] = []

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        self.health_clock.advance(seconds)
        live, ready = self.ops.health.liveness(), self.ops.health.readiness()
        self.seen.append((live.ok, live.reason, ready.ok, ready.reason))


def make_ops(clock: ManualClock) -> Ops:
    health = Health(clock=clock, liveness_intervals=2, liveness_min=120)  # limit: 120 s
    health.config_loaded()
    health.langfuse_ok()
    return Ops(Telemetry(clock=clock), health, None)


def make_client(server: httpx.MockTransport, ops: Ops, clock: FakeClock) -> LangfuseClient:
    client = LangfuseClient(make_settings(), clock=clock, http=httpx.AsyncClient(transport=server))
    client.stats.on_request = ops.langfuse_request
    client.stats.on_retry = ops.langfuse_retry
    return client


async def in_tick(ops: Ops, client: LangfuseClient) -> object:
    """One Langfuse read inside a tick of TARGET (as the worker's ticks make them)."""
    async with ops.tick(TARGET, 30):
        return (await client.transport.plain(HEALTH, HEALTH.path)).body


async def test_a_read_that_trickles_in_keeps_liveness_passing_while_it_moves(clock: ManualClock) -> None:
    """A page arriving in pieces 100 s apart for 500 s, against a 120 s limit: alive all along (before:
    the read was one silent step, and /healthz failed from 120 s on while /readyz said "ready")."""
    ops = make_ops(clock)
    body = Paced()
    server = httpx.MockTransport(lambda request: httpx.Response(200, stream=body))
    client = make_client(server, ops, FakeClock())
    read = asyncio.create_task(in_tick(ops, client))
    try:
        pieces = [ANSWER[i : i + 8] for i in range(0, len(ANSWER), 8)]
        for piece in pieces:
            await body.asked.get()  # the previous piece was received
            clock.advance(100)
            probe = ops.health.liveness()
            assert probe.ok, probe.reason
            assert probe.details["targets"][TARGET]["idle_seconds"] == 100
            body.pieces.put_nowait(piece)
        await body.asked.get()
        body.pieces.put_nowait(None)
        assert await read == {"status": "OK", "version": "4.60.0"}
        assert ops.health.readiness().ok

        # The same read that stops moving: liveness fails once the limit has passed.
        body = Paced()
        read = asyncio.create_task(in_tick(ops, client))
        await body.asked.get()
        body.pieces.put_nowait(ANSWER[:8])
        await body.asked.get()
        clock.advance(121)
        probe = ops.health.liveness()
        assert not probe.ok
        assert probe.reason == f"scheduler stalled: {TARGET} (no progress for 121s, limit 120s)"
    finally:
        read.cancel()
        await client.aclose()


async def test_a_retry_waiting_longer_than_the_limit_is_alive_and_not_ready(clock: ManualClock) -> None:
    """A 429 asking for 200 s (a 120 s liveness limit), then a 503: at the end of each wait the worker is
    alive (the wait was announced) and not ready, saying why; ready again once Langfuse answers."""
    ops = make_ops(clock)
    answers = iter([
        httpx.Response(429, headers={"Retry-After": "200"}, json={"message": "rate limited"}),
        httpx.Response(503, json={"message": "unavailable"}),
        httpx.Response(200, content=ANSWER),
    ])
    waits = SleepMovesHealth(clock, ops)
    client = make_client(httpx.MockTransport(lambda request: next(answers)), ops, waits)
    try:
        assert await in_tick(ops, client) == {"status": "OK", "version": "4.60.0"}
    finally:
        await client.aclose()
    assert waits.sleeps[0] == 200.0 and len(waits.sleeps) == 2
    assert waits.seen == [
        (True, "alive", False, "Langfuse: retrying GET /api/public/health after HTTP 429"),
        (True, "alive", False, "Langfuse: retrying GET /api/public/health after HTTP 503"),
    ]
    assert ops.health.readiness().ok
    assert ops.health.readiness().details["langfuse"]["retrying"] is None


async def test_a_read_running_out_of_its_deadline_is_retried_alive_and_not_ready(clock: ManualClock) -> None:
    """A server that trickles so slowly that a read runs out of its deadline: retried, and meanwhile
    /readyz says why (it cannot do its job) while /healthz passes (it is not stuck)."""
    ops = make_ops(clock)
    body = Paced()
    served = 0

    def server(request: httpx.Request) -> httpx.Response:
        nonlocal served
        served += 1
        return httpx.Response(200, stream=body) if served == 1 else httpx.Response(200, content=ANSWER)

    waits = SleepMovesHealth(clock, ops)
    client = make_client(httpx.MockTransport(server), ops, waits)
    deadlines = ManualDeadlines()
    client.transport.deadline = deadlines
    read = asyncio.create_task(in_tick(ops, client))
    try:
        await body.asked.get()
        body.pieces.put_nowait(ANSWER[:8])
        await body.asked.get()
        clock.advance(90)
        deadlines.expire()
        assert await read == {"status": "OK", "version": "4.60.0"}
    finally:
        read.cancel()
        await client.aclose()
    ((alive, _, ready, why),) = waits.seen
    assert alive and not ready
    assert why == "Langfuse: retrying GET /api/public/health after timeout"


def test_liveness_counts_an_announced_wait(clock: ManualClock) -> None:
    """A wait announced (300 s) moves the limit (120 s) past its end, even when other work of the tick
    reports meanwhile (two batches: one waits, the other goes on)."""
    health = Health(clock=clock, liveness_intervals=2, liveness_min=120)
    health.tick_started(TARGET, 30)
    with progress.reported_to(lambda wait: health.progress(TARGET, wait)):
        progress.pausing(300)
        clock.advance(100)
        progress.moving()
    assert health.liveness().details["targets"][TARGET]["waiting_seconds"] == 200
    clock.advance(319)
    assert health.liveness().ok
    clock.advance(2)
    assert health.liveness().reason == f"scheduler stalled: {TARGET} (no progress for 321s, limit 320s)"
    with progress.reported_to(lambda wait: health.progress(TARGET, wait)):
        progress.moving()  # the wait is over: the usual limit again
    clock.advance(121)
    assert not health.liveness().ok


def test_readiness_lists_every_reason_in_order_and_takes_new_conditions(clock: ManualClock) -> None:
    """Each reason is a condition of its own; ``reason`` is the first, ``reasons`` all of them. A condition
    added elsewhere (e.g. the state's writes failing) needs no change here."""
    health = Health(clock=clock)
    assert health.readiness().details["reasons"] == ["configuration not loaded", "Langfuse: Langfuse not checked yet"]
    health.config_loaded()
    health.langfuse_ok()
    assert health.readiness().reason == "ready"

    health.not_ready("state", "state: writes failing: disk full")
    health.database_failed("connection refused")
    health.langfuse_failed("HTTP 503: unavailable")
    health.target_stopped("runs", "400 Bad Request: parseIoAsJson is not supported")
    health.langfuse_retrying("GET /api/public/v2/observations", "connection_error")
    probe = health.readiness()
    assert not probe.ok
    assert probe.details["reasons"] == [
        "target runs stopped: 400 Bad Request: parseIoAsJson is not supported",
        "Langfuse: HTTP 503: unavailable",
        "Langfuse: retrying GET /api/public/v2/observations after connection error",
        "database: connection refused",
        "state: writes failing: disk full",
    ]
    assert probe.reason == probe.details["reasons"][0]

    health.shutting_down()
    assert health.readiness().reason == "shutting down"
    health.ready_again("shutdown")
    health.ready_again("target:runs")
    health.langfuse_ok()
    health.langfuse_answered()
    health.database_ok()
    health.ready_again("state")
    assert health.readiness().ok

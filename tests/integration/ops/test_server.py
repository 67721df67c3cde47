"""The operations endpoints over real HTTP on 127.0.0.1: probes flip, /metrics shows the counters."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.support.clocks import ManualClock as FakeClock
from tests.support.paths import ROOT
from trace_scorer.config import load_settings
from trace_scorer.config.http import HttpSettings
from trace_scorer.ops import Health, Ops, OpsServer, Telemetry
from trace_scorer.ops.server import MAX_CONNECTIONS, MAX_PER_CLIENT


@pytest.fixture
async def server(health: Health, telemetry: Telemetry) -> AsyncIterator[OpsServer]:
    telemetry.export_health(health)
    async with OpsServer(health, telemetry, host="127.0.0.1", port=0) as running:
        yield running


@pytest.fixture
async def client(server: OpsServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        yield http


async def test_readiness_flips_with_config_and_langfuse(client: httpx.AsyncClient, health: Health) -> None:
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["reason"] == "configuration not loaded"

    health.config_loaded()
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["reason"] == "Langfuse: Langfuse not checked yet"

    health.langfuse_ok()
    answer = await client.get("/readyz")
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    assert answer.json()["langfuse"]["ok"] is True

    health.langfuse_failed("401 Unauthorized: invalid credentials for key sk-lf-0123456789abcdef")
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["reason"].startswith("Langfuse: 401 Unauthorized")
    assert "sk-lf-0123" not in answer.text  # a reason quoting a key never shows it

    health.langfuse_ok()
    assert (await client.get("/readyz")).status_code == 200
    health.shutting_down()
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["reason"] == "shutting down"


async def test_liveness_fails_when_ticks_stop(client: httpx.AsyncClient, health: Health, clock: FakeClock) -> None:
    answer = await client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json()["reason"] == "alive (no target scheduled yet)"

    health.watch("agent", 60)
    health.watch("runs", 600)
    clock.advance(170)
    assert (await client.get("/healthz")).status_code == 200
    clock.advance(20)  # 190 s without a first tick of "agent": more than 3 × 60 s
    answer = await client.get("/healthz")
    assert answer.status_code == 503
    assert answer.json()["reason"] == "scheduler stalled: agent (no progress for 190s, limit 180s)"

    health.tick_started("agent", 60)
    answer = await client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json()["targets"]["agent"]["ticks"] == 1

    clock.advance(150)
    health.progress("agent")  # a long tick that is still moving is alive
    clock.advance(150)
    assert (await client.get("/healthz")).status_code == 200
    clock.advance(31)
    assert (await client.get("/healthz")).status_code == 503


async def test_liveness_minimum_allowance(clock: FakeClock) -> None:
    health = Health(clock=clock, liveness_intervals=3, liveness_min=120)
    health.tick_started("fast", 5)
    clock.advance(100)  # 20 intervals, but under the 120 s floor
    assert health.liveness().ok
    clock.advance(21)
    assert not health.liveness().ok


async def test_metrics_expose_counters(client: httpx.AsyncClient, telemetry: Telemetry, health: Health) -> None:
    telemetry.traces_scored("agent", 7)
    telemetry.langfuse_request("POST /api/public/scores", 202)
    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'trace_scorer_traces_scored_total{target="agent"} 7.0' in answer.text
    assert 'trace_scorer_langfuse_requests_total{endpoint="POST /api/public/scores",status="202"} 1.0' in answer.text
    assert 'trace_scorer_up{probe="liveness"} 1.0' in answer.text

    telemetry.traces_scored("agent", 3)
    answer = await client.get("/metrics")
    assert 'trace_scorer_traces_scored_total{target="agent"} 10.0' in answer.text


async def test_metrics_openmetrics_and_gzip(server: OpsServer, telemetry: Telemetry) -> None:
    telemetry.traces_seen("agent", 2)
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        answer = await http.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert answer.headers["content-type"].startswith("application/openmetrics-text")
        assert answer.text.rstrip().endswith("# EOF")
    # raw socket, so that the client does not decode the body for us
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Content-Encoding: gzip" in head
    assert b'trace_scorer_traces_seen_total{target="agent"} 2.0' in gzip.decompress(body)


async def test_other_paths_and_methods(client: httpx.AsyncClient) -> None:
    assert (await client.get("/")).text.startswith("trace-scorer\n")
    missing = await client.get("/nope?x=1")
    assert missing.status_code == 404
    assert "/metrics" in missing.json()["endpoints"]
    assert (await client.get("/healthz?verbose=1")).status_code == 200  # query strings are ignored
    posted = await client.post("/healthz", content=b"{}")
    assert posted.status_code == 405
    assert posted.headers["allow"] == "GET, HEAD"
    head = await client.head("/readyz")
    assert head.status_code == 503
    assert head.content == b""
    assert int(head.headers["content-length"]) > 0


async def test_malformed_and_oversized_requests(server: OpsServer) -> None:
    async def raw(payload: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(payload)
        await writer.drain()
        data = await reader.read()
        writer.close()
        return data

    assert (await raw(b"NONSENSE\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
    assert (await raw(b"GET / HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")).startswith(b"HTTP/1.1 431 ")
    # the server keeps serving after both
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        assert (await http.get("/healthz")).status_code == 200


# -- connections that are held open (issue #22, item 6) ---------------------------------------------------


async def hold(port: int, client: str, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``count`` connections from the loopback address ``client`` that send nothing."""
    return [await asyncio.open_connection("127.0.0.1", port, local_addr=(client, 0)) for _ in range(count)]


async def probe_all(server: OpsServer) -> dict[str, list[int]]:
    """Each endpoint probed as the kubelet does: a fresh connection, from 127.0.0.1."""
    statuses: dict[str, list[int]] = {}
    fresh = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=server.url, timeout=30, limits=fresh) as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            statuses[path] = [(await http.get(path)).status_code for _ in range(14)]
    return statuses


async def closed(reader: asyncio.StreamReader) -> bool:
    """The server closed (reset) this connection without answering."""
    try:
        return await asyncio.wait_for(reader.read(), 30) == b""
    except ConnectionResetError:
        return True


async def test_idle_and_slow_loris_connections_never_fail_a_probe(server: OpsServer, health: Health) -> None:
    """40 idle connections and 10 trickling a request head, all from one client (127.0.0.2): every probe
    from another client is answered (before: 503 "too many connections" for all of them), and the holder
    keeps at most MAX_PER_CLIENT connections — its oldest are closed, never the newcomer's."""
    health.config_loaded()
    health.langfuse_ok()
    idle = await hold(server.port, "127.0.0.2", 40)
    loris = await hold(server.port, "127.0.0.2", 10)
    for _reader, writer in loris:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
        await writer.drain()
    statuses = await probe_all(server)
    for path, answers in statuses.items():
        assert answers == [200] * 14, (path, answers)
    for _ in range(3):  # the slow loris keeps trickling (on its connections still open): still answered
        for _reader, writer in loris[-MAX_PER_CLIENT:]:
            writer.write(b"X-Drip: a\r\n")
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            assert (await http.get("/healthz")).status_code == 200
    # the first 42 of the 50 held connections were closed to make room; the newest 8 are still open
    for reader, _writer in (idle + loris)[: 50 - MAX_PER_CLIENT]:
        assert await closed(reader)
    for _reader, writer in idle + loris:
        writer.close()


async def test_many_clients_holding_connections_never_fail_a_probe(server: OpsServer, health: Health) -> None:
    """20 clients holding 8 connections each (160, beyond MAX_CONNECTIONS): probes are still answered,
    and a client holding one connection keeps it (the greediest holders make room)."""
    health.config_loaded()
    health.langfuse_ok()
    modest_reader, modest = (await hold(server.port, "127.0.0.3", 1))[0]
    crowd = [conn for n in range(20) for conn in await hold(server.port, f"127.0.1.{n + 1}", MAX_PER_CLIENT)]
    assert 20 * MAX_PER_CLIENT > MAX_CONNECTIONS
    statuses = await probe_all(server)
    for path, answers in statuses.items():
        assert answers == [200] * 14, (path, answers)
    modest.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")  # the one held connection, used at last
    await modest.drain()
    assert (await asyncio.wait_for(modest_reader.read(), 30)).startswith(b"HTTP/1.1 200 ")
    for _reader, writer in [*crowd, (modest_reader, modest)]:
        writer.close()


async def test_stop_releases_the_port(health: Health, telemetry: Telemetry) -> None:
    server = OpsServer(health, telemetry, host="127.0.0.1", port=0)
    await server.start()
    port = server.port
    # a client that connects and never sends its request does not hold stop() up
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:  # accepted after the idle one
        assert (await http.get("/healthz")).status_code == 200
    await asyncio.wait_for(server.stop(), 30)
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    writer.close()
    again = OpsServer(health, telemetry, host="127.0.0.1", port=port)  # the port can be bound again
    await again.start()
    await again.stop()


async def test_ops_facade_from_settings(clock: FakeClock) -> None:
    settings = HttpSettings(host="127.0.0.1", port=0, liveness_intervals=2, liveness_min=0)
    ops = Ops.from_settings(settings, telemetry=Telemetry(clock=clock), health=Health(clock=clock,
                            liveness_intervals=2, liveness_min=0))
    await ops.start()
    try:
        assert ops.server is not None
        async with httpx.AsyncClient(base_url=ops.server.url, timeout=5) as http:
            async with ops.tick("agent", 10):
                pass
            text = (await http.get("/metrics")).text
            assert 'trace_scorer_ticks_total{outcome="ok",target="agent"} 1.0' in text
            clock.advance(21)
            assert (await http.get("/healthz")).status_code == 503
    finally:
        await ops.stop()
    disabled = Ops.from_settings(HttpSettings(enabled=False))
    await disabled.start()  # nothing is bound
    assert disabled.server is None
    await disabled.stop()


def test_http_settings_defaults_and_environment(tmp_path: Path) -> None:
    empty = tmp_path / "settings.toml"
    empty.write_text("")
    settings = load_settings(empty, environ={})
    assert settings.http == HttpSettings()
    assert (settings.http.enabled, settings.http.host, settings.http.port) == (True, "127.0.0.1", 9477)
    settings = load_settings(empty, environ={"TRACE_SCORER_HTTP__HOST": "0.0.0.0", "TRACE_SCORER_HTTP__PORT": "9100",
                                            "TRACE_SCORER_HTTP__LIVENESS_MIN": "5m"})
    assert (settings.http.host, settings.http.port, settings.http.liveness_min) == ("0.0.0.0", 9100, 300.0)


def test_probe_bodies_are_json_serialisable(health: Health) -> None:
    health.watch("agent", 60)
    for probe in (health.liveness(), health.readiness()):
        json.dumps(probe.body())


def test_shipped_settings_show_the_http_defaults() -> None:
    import tomllib

    shipped = tomllib.loads((ROOT / "settings.toml").read_text())["http"]
    assert HttpSettings(**shipped) == HttpSettings()
    assert set(shipped) == set(HttpSettings.model_fields)

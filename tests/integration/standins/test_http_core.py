"""The stand-ins' shared parts: the loopback HTTP server (keep-alive, chunked and gzip bodies, cut
connections), the fault engine and the Retry-After ledger, the score store's upsert rule."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from standins.faults import FaultConfig, FaultEngine, RateLimitLedger, ScriptedFault, format_retry_after, route_matches
from standins.http import HttpServer, Request, Response, ServerThread
from standins.score_store import ScoreStore


async def echo(request: Request) -> Response:
    if request.raw_path == "/drop":
        cut = Response.json(200, {"data": "x" * 1000})
        cut.drop = "mid"
        return cut
    if request.raw_path == "/reset":
        return Response(drop="before")
    payload = {"method": request.method, "query": request.query(), "body": request.body.decode(), "peer": request.peer}
    return Response.json(200, payload)


@pytest.fixture
def server() -> Iterator[str]:
    thread = ServerThread(echo)
    port = thread.start()
    yield f"http://127.0.0.1:{port}"
    thread.stop()


def test_keep_alive_query_and_bodies(server: str) -> None:
    with httpx.Client(base_url=server) as http:
        first = http.get("/a", params=[("x", "1"), ("x", "2"), ("y", "")]).json()
        second = http.post("/b", content=b"hello").json()
        compressed = http.post("/c", content=gzip.compress(b"zipped"), headers={"content-encoding": "gzip"}).json()
        chunked = http.post("/d", content=iter([b"one-", b"two"])).json()
    assert first["query"] == {"x": ["1", "2"], "y": [""]}
    assert (second["method"], second["body"]) == ("POST", "hello")
    assert first["peer"] == second["peer"]  # the same connection, kept alive
    assert compressed["body"] == "zipped"
    assert chunked["body"] == "one-two"


def test_cut_connections_look_like_network_failures(server: str) -> None:
    with httpx.Client(base_url=server) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            http.get("/drop")  # headers and half the body, then closed
        with pytest.raises(httpx.RemoteProtocolError):
            http.get("/reset")  # closed before any answer
        assert http.get("/fine").status_code == 200  # the client reconnects


def test_only_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        HttpServer(echo, host="0.0.0.0")


async def test_a_server_stops_with_connections_open() -> None:
    server = HttpServer(echo)
    port = await server.start()
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"http://127.0.0.1:{port}/x")).status_code == 200
        await server.stop()  # the kept-alive connection is closed
        with pytest.raises(httpx.TransportError):
            await asyncio.wait_for(http.get(f"http://127.0.0.1:{port}/x"), 5)


# --- faults ----------------------------------------------------------------------------------------------------


def test_fault_rates_are_seeded_and_respect_routes() -> None:
    config = FaultConfig(rate_429=0.2, rate_5xx=0.1, rate_drop=0.1, routes=["/api/public/scores"], seed=4)
    draws = [FaultEngine(config).decide("POST /api/public/scores").kind for _ in range(1)]
    engine = FaultEngine(config)
    kinds = Counter(engine.decide("POST /api/public/scores").kind for _ in range(5000))
    assert abs(kinds["429"] / 5000 - 0.2) < 0.03 and abs(kinds["5xx"] / 5000 - 0.1) < 0.03
    assert abs(kinds["drop"] / 5000 - 0.1) < 0.03
    assert {FaultEngine(config).decide("GET /api/public/health").kind for _ in range(50)} == {None}
    again = FaultEngine(config)
    assert [again.decide("POST /api/public/scores").kind for _ in range(1)] == draws


def test_scripted_faults_come_first_and_wait_for_their_route() -> None:
    engine = FaultEngine()
    engine.add_script(
        [ScriptedFault("429", route="POST /api/public/scores", retry_after=3), ScriptedFault("latency", seconds=0.5)]
    )
    assert engine.decide("GET /api/public/health").latency == 0.5  # the route-less latency fault matches anything
    assert engine.decide("GET /api/public/health").kind is None
    decision = engine.decide("POST /api/public/scores")
    assert (decision.kind, decision.retry_after) == ("429", 3)
    assert not engine.script


def test_a_plan_limit_counts_fixed_windows() -> None:
    now = [100.0]
    engine = FaultEngine(FaultConfig(requests_per_window=3, window_seconds=60), clock=lambda: now[0])
    assert [engine.decide("GET /x").kind for _ in range(3)] == [None, None, None]
    now[0] = 120.0
    over = engine.decide("GET /x")
    assert (over.kind, over.retry_after) == ("429", 40)  # the window started at 100: 40 s left
    now[0] = 160.0  # a new window starts with the next request
    assert engine.decide("GET /x").kind is None


def test_fault_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown fault settings"):
        FaultConfig.from_dict({"rate429": 0.1})
    with pytest.raises(ValueError, match="add up"):
        FaultConfig.from_dict({"rate_429": 0.7, "rate_5xx": 0.5})
    with pytest.raises(ValueError, match="kind"):
        ScriptedFault("boom")
    assert route_matches("GET /api/public/health", ["/api/public/health"])
    assert not route_matches("GET /api/public/health", ["POST /api/public/health"])
    assert (format_retry_after(2.0), format_retry_after(0.25)) == ("2", "0.25")


def test_the_ledger_tells_early_retries_from_patient_ones() -> None:
    ledger = RateLimitLedger(tolerance=0.01)
    ledger.on_429("sig-a", "GET /x", at=10.0, retry_after=1.0)
    ledger.on_429("sig-b", "GET /y", at=10.0, retry_after=1.0)
    ledger.on_request("sig-a", "GET /x", at=10.5)  # too soon
    ledger.on_request("sig-b", "GET /y", at=11.0)  # on time
    ledger.on_request("sig-c", "GET /z", at=10.1)  # not a retry at all
    assert [e["route"] for e in ledger.early] == ["GET /x"] and ledger.early[0]["early_by"] == 0.5
    assert ledger.honoured == 1 and ledger.sent_count == 2


# --- the score store ---------------------------------------------------------------------------------------------


def test_scores_upsert_on_id_name_and_date() -> None:
    store = ScoreStore()
    body = {"id": "s1", "traceId": "t1", "name": "accuracy", "value": 0.1}
    assert store.upsert(body, "2026-11-01T10:00:00Z", "scores")
    assert not store.upsert({**body, "value": 0.2}, "2026-11-01T23:59:00+00:00", "scores")  # same date: overwrite
    assert store.upsert({**body, "value": 0.3}, "2026-11-02T00:00:00Z", "scores")  # next day: a second score
    assert store.upsert({**body, "name": "other"}, "2026-11-01T10:00:00Z", "scores")  # other name: another score
    summary = store.summary()
    assert (summary["stored"], summary["writes"], summary["overwrites"]) == (3, 4, 1)
    assert summary["duplicate_count"] == 1 and summary["duplicates"][0]["name"] == "accuracy"
    assert sorted(s.body["value"] for s in store.by_subject()[(("trace", "t1"), "accuracy")]) == [0.2, 0.3]
    assert json.loads(json.dumps(summary)) == summary


def test_a_timestamp_in_another_zone_counts_by_its_utc_date() -> None:
    store = ScoreStore(keep_details=False)
    body = {"id": "s1", "traceId": "t1", "name": "n", "value": 1, "comment": "c", "metadata": {"k": "v"}}
    store.upsert(body, "2026-11-01T23:30:00-02:00", "scores")  # 01:30 UTC on the 2nd
    store.upsert(body, "2026-11-02T05:00:00Z", "scores")
    assert store.summary()["stored"] == 1
    stored = next(iter(store.scores.values()))
    assert "comment" not in stored.body and "metadata" not in stored.body

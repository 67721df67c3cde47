"""Retries we own: Retry-After on 429, back-off on 5xx/timeouts/dropped connections, no retry on other
4xx, clear auth errors, the per-minute budget, request counters, and no secret in any message."""

from __future__ import annotations

import asyncio
import email.utils
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
import respx
import structlog

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.deadlines import ManualDeadlines
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET, MakeClient, make_settings
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import Disconnect, InProcessLangfuse, Timeout
from trace_scorer.langfuse import (
    ApiGeneration,
    LangfuseAuthError,
    LangfuseClient,
    LangfuseHTTPError,
    LangfuseTransportError,
    TimeWindow,
    TraceFilter,
)
from trace_scorer.langfuse.http.endpoints import HEALTH as HEALTH_ENDPOINT
from trace_scorer.langfuse.http.transport import error_message

OBS = ("GET", "/api/public/v2/observations")
HEALTH = ("GET", "/api/public/health")
WINDOW = TimeWindow(at(0), at(60))


async def list_roots(client: object) -> list[str]:
    return [r.trace_id async for r in client.reads.list_trace_roots(WINDOW, TraceFilter())]  # type: ignore[attr-defined]


async def test_429_waits_what_retry_after_says_in_seconds(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.add_rows(f.observation("r", "t1", at(1), end=at(2), root=True))
    v4.fail_next(*OBS, f.error("rate limited", 429, **{"Retry-After": "17"}))
    client = make_client(ApiGeneration.V4)
    with structlog.testing.capture_logs() as logs:
        assert await list_roots(client) == ["t1"]
    assert clock.sleeps == [17.0]
    (retry,) = [e for e in logs if e["event"] == "langfuse.retry"]
    assert (retry["outcome"], retry["wait_seconds"], retry["attempt"]) == ("429", 17.0, 1)
    assert client.stats.requests[("GET /api/public/v2/observations", "429")] == 1
    assert client.stats.retries[("GET /api/public/v2/observations", "429")] == 1
    assert client.stats.retry_wait_seconds == 17.0


async def test_429_retry_after_as_http_date(v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient) -> None:
    when = email.utils.format_datetime(clock.now() + timedelta(seconds=42), usegmt=True)
    v4.fail_next(*HEALTH, f.error("slow down", 429, **{"Retry-After": when}))
    client = make_client(ApiGeneration.V4)
    await client.connect()
    assert clock.sleeps == [42.0]


async def test_429_without_retry_after_backs_off_exponentially(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*HEALTH, f.error("slow", 429), f.error("slow", 429))
    await make_client().connect()
    assert clock.sleeps == [2.0, 4.0]


async def test_429_asking_for_longer_than_the_maximum_is_raised_not_waited(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*HEALTH, f.error("come back tomorrow", 429, **{"Retry-After": "86400"}))
    with pytest.raises(LangfuseHTTPError) as raised:
        await make_client().connect()
    assert raised.value.status == 429 and "come back tomorrow" in str(raised.value)
    assert clock.sleeps == []


async def test_5xx_backs_off_2_4_8_then_succeeds(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*HEALTH, f.error("db down", 503), f.error("bad gateway", 502), f.error("oops", 500))
    info = await make_client().connect()
    assert info.server_version == "4.60.0"
    assert clock.sleeps == [2.0, 4.0, 8.0]


async def test_backoff_is_capped_and_attempts_are_bounded(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*HEALTH, *[f.error("down", 500)] * 10)
    client = make_client(retry={"initial": "2s", "multiplier": 3, "max": "10s", "max_attempts": 5})
    with pytest.raises(LangfuseHTTPError) as raised:
        await client.connect()
    assert clock.sleeps == [2.0, 6.0, 10.0, 10.0]
    assert raised.value.attempts == 5 and "after 5 attempts" in str(raised.value) and "down" in str(raised.value)
    assert len(v4.calls_to(*HEALTH)) == 5


async def test_timeouts_and_dropped_connections_are_retried(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.add_rows(f.observation("r", "t1", at(1), end=at(2), root=True))
    v4.fail_next(*OBS, Timeout(), Disconnect())
    client = make_client(ApiGeneration.V4)
    assert await list_roots(client) == ["t1"]
    assert clock.sleeps == [2.0, 4.0]
    label = "GET /api/public/v2/observations"
    assert client.stats.requests[(label, "timeout")] == 1
    assert client.stats.requests[(label, "connection_error")] == 1
    assert client.stats.requests[(label, "200")] == 1


async def test_timeouts_exhausted_raise_a_transport_error(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*OBS, *[Timeout()] * 3)
    client = make_client(ApiGeneration.V4, retry={"max_attempts": 3})
    with pytest.raises(LangfuseTransportError) as raised:
        await list_roots(client)
    assert raised.value.kind == "timeout" and raised.value.attempts == 3


async def test_legacy_endpoints_retry_the_same_way(
    v3: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v3.add_rows(f.observation("r", "t1", at(1), end=at(2), root=True))
    v3.fail_next(
        "GET",
        "/api/public/traces",
        f.error("busy", 429, **{"Retry-After": "3"}),
        f.error("down", 503),
        Timeout(),
    )
    client = make_client(ApiGeneration.V3)
    assert await list_roots(client) == ["t1"]
    assert clock.sleeps == [3.0, 4.0, 8.0]


async def test_other_4xx_is_not_retried_and_carries_the_server_message(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*OBS, f.error("Invalid filter: column 'foo' does not exist", 400))
    client = make_client(ApiGeneration.V4)
    with pytest.raises(LangfuseHTTPError) as raised:
        await list_roots(client)
    assert raised.value.status == 400
    assert "Invalid filter: column 'foo' does not exist" in str(raised.value)
    assert clock.sleeps == [] and len(v4.calls_to(*OBS)) == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failure_names_base_url_and_key_variables_never_the_secret(
    status: int, v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.fail_next(*HEALTH, f.error("Invalid credentials. Confirm that you've configured the correct host.", status))
    with structlog.testing.capture_logs() as logs, pytest.raises(LangfuseAuthError) as raised:
        await make_client().connect()
    message = str(raised.value)
    assert "https://langfuse.test" in message
    assert "LANGFUSE_PUBLIC_KEY" in message and "LANGFUSE_SECRET_KEY" in message
    assert "Invalid credentials" in message
    assert SECRET not in message and SECRET not in repr(logs)
    assert clock.sleeps == []  # not retried


async def test_the_secret_is_sent_as_basic_auth_and_appears_in_no_error(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    v3.fail_next("GET", "/api/public/traces", f.error("nope", 400))
    client = make_client(ApiGeneration.V3)
    with structlog.testing.capture_logs() as logs, pytest.raises(LangfuseHTTPError) as raised:
        await list_roots(client)
    request = v3.calls_to("GET", "/api/public/traces")[0].request
    assert request.headers["authorization"].startswith("Basic ")
    assert request.headers["x-langfuse-public-key"] == PUBLIC
    assert SECRET not in str(raised.value) and SECRET not in repr(logs)
    assert SECRET not in repr(client.settings) and SECRET not in str(client.stats.snapshot())


async def test_budget_keeps_requests_per_minute(
    v4: InProcessLangfuse, clock: FakeClock, make_client: MakeClient
) -> None:
    v4.add_rows(*[f.observation(f"r{n}", f"t{n}", at(n), end=at(n + 0.5), root=True) for n in range(10)])
    client = make_client(ApiGeneration.V4, requests_per_minute=3, page_size=1)
    assert len(await list_roots(client)) == 10  # 10 requests at 3 a minute
    times = [c.at for c in v4.calls_to(*OBS)]
    assert times == [0.0] * 3 + [60.0] * 3 + [120.0] * 3 + [180.0]
    assert client.stats.budget_wait_seconds == 180.0


async def test_stats_snapshot_counts_by_endpoint_and_outcome(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    v4.fail_next(*HEALTH, f.error("down", 503))
    client = make_client()
    await client.connect()
    snapshot = client.stats.snapshot()
    assert snapshot["total_requests"] == 5 and snapshot["total_retries"] == 1
    assert {"endpoint": "GET /api/public/health", "outcome": "503", "count": 1} in snapshot["requests"]  # type: ignore[operator]


async def test_a_proxy_error_page_is_retried_and_reported_as_text(clock: FakeClock, make_client: MakeClient) -> None:
    # Not Langfuse's answer (so not the stand-in's): a load balancer in front of it.
    page = "<html><body>502 Bad Gateway</body></html>"
    with respx.mock(assert_all_called=True) as router:
        route = router.get(f"{BASE_URL}/api/public/health").mock(return_value=httpx.Response(502, text=page))
        client = make_client(retry={"max_attempts": 2})
        with pytest.raises(LangfuseHTTPError) as raised:
            await client.connect()
    assert route.call_count == 2 and clock.sleeps == [2.0]
    assert raised.value.status == 502 and "502 Bad Gateway" in raised.value.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"message": "Invalid request data", "error": [{"path": ["value"], "message": "Expected number"}]},
            "Invalid request data: [{'path': ['value'], 'message': 'Expected number'}]",
        ),
        ({"message": "Not found"}, "Not found"),
        ({"detail": "odd"}, '{"detail": "odd"}'),
        ("plain text", "plain text"),
        ("", "Service Unavailable"),
        (None, "Service Unavailable"),
    ],
)
def test_error_messages_come_from_the_body_or_the_status(body: object, message: str) -> None:
    assert error_message(body, 503) == message


# --- the total deadline of a request (issue #13) -------------------------------------------------


class _Trickle(httpx.AsyncByteStream):
    """A body that sends its first bytes and then nothing more, ever (each read within any timeout)."""

    def __init__(self, started: asyncio.Event) -> None:
        self._started = started

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"status": "OK",'
        self._started.set()
        await asyncio.Event().wait()


def test_request_deadline_defaults_to_three_timeouts() -> None:
    assert make_settings().deadline == 90.0
    assert make_settings(timeout="5s").deadline == 15.0
    assert make_settings(request_deadline="7s").deadline == 7.0


async def test_a_server_trickling_its_answer_runs_out_of_the_request_deadline_and_is_retried(
    clock: FakeClock,
) -> None:
    trickling = asyncio.Event()
    served = 0

    def server(request: httpx.Request) -> httpx.Response:
        nonlocal served
        served += 1
        if served == 1:
            return httpx.Response(200, headers={"content-type": "application/json"}, stream=_Trickle(trickling))
        return httpx.Response(200, json={"status": "OK", "version": "4.60.0"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(server), timeout=5.0)
    client = LangfuseClient(make_settings(timeout="5s"), clock=clock, http=http)
    deadlines = ManualDeadlines()
    client.transport.deadline = deadlines
    try:
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(client.transport.plain(HEALTH_ENDPOINT, "/api/public/health"))
            try:
                await trickling.wait()
                assert deadlines.open == [15.0]  # the whole request, body included: 3 × timeout
                deadlines.expire()
                answer = await task
            finally:
                task.cancel()
    finally:
        await client.aclose()
        await http.aclose()

    assert answer.body["status"] == "OK" and served == 2
    assert client.stats.requests[("GET /api/public/health", "timeout")] == 1
    assert client.stats.retries[("GET /api/public/health", "timeout")] == 1
    assert clock.sleeps == [2.0]
    (retry,) = [e for e in logs if e["event"] == "langfuse.retry"]
    assert retry["outcome"] == "timeout" and "no complete answer within 15s" in retry["error"]

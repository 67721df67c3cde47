"""Every answer's ``Date`` header reaches the client's idea of the server's time, errors included."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import Reply
from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer.langfuse import Dataset, LangfuseHTTPError


async def test_answers_date_the_servers_time(v4: InProcessLangfuse, make_client: MakeClient, clock: FakeClock) -> None:
    client = make_client()
    assert client.transport.server_time.now() is None
    await client.connect()
    assert client.transport.server_time.now() == clock.now()
    clock.elapsed += 90  # no request since: carried on the monotonic clock
    assert client.transport.server_time.now() == clock.now()


async def test_an_error_answer_dates_the_servers_time_too(
    v4: InProcessLangfuse, make_client: MakeClient, clock: FakeClock
) -> None:
    client = make_client(retry={"max_attempts": 1})
    moment = clock.now() + timedelta(hours=3)
    date = moment.strftime("%a, %d %b %Y %H:%M:%S GMT")
    v4.on("GET", "/api/public/health", Reply(400, {"message": "no"}, {"Date": date}, unchecked="test"))
    with pytest.raises(LangfuseHTTPError):
        await client.connect()
    assert client.transport.server_time.now() == moment


async def test_an_experiments_read_dates_the_servers_time(
    v4: InProcessLangfuse, make_client: MakeClient, clock: FakeClock
) -> None:
    """Experiments were once listed through the ``langfuse`` package's client; their errors carry the
    server's Date as well."""
    client = make_client(retry={"max_attempts": 1})
    await client.connect()
    moment = clock.now() + timedelta(hours=3)
    date = moment.strftime("%a, %d %b %Y %H:%M:%S GMT")
    v4.on("GET", "/api/public/experiments", Reply(503, {"message": "busy"}, {"Date": date}, unchecked="test"))
    with pytest.raises(LangfuseHTTPError):
        [e async for e in client.reads.list_experiments([Dataset("d1", "bench")], clock.now() - timedelta(days=1))]
    assert client.transport.server_time.now() == moment

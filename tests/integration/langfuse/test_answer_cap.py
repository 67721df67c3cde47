"""Answers are read up to ``[langfuse] max_answer_bytes`` (issue #22 item 8): a longer one stops being read
(chunk by chunk, or at once when ``Content-Length`` says so) and is not retried."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_client import make_settings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.langfuse.errors import LangfuseAnswerTooLarge
from trace_scorer.langfuse.http.endpoints import HEALTH as HEALTH_ENDPOINT
from trace_scorer.runtime import progress

CHUNK = b" " * 10_000


class _Body(httpx.AsyncByteStream):
    """1 MB of JSON in 10 kB chunks, counting the chunks read."""

    def __init__(self) -> None:
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(100):
            self.read += 1
            yield CHUNK
        yield b'{"status": "OK"}'


@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
async def test_an_answer_over_the_cap_stops_being_read_and_is_not_retried(clock: FakeClock, declared: bool) -> None:
    bodies: list[_Body] = []

    def server(request: httpx.Request) -> httpx.Response:
        bodies.append(_Body())
        headers = {"content-type": "application/json"}
        if declared:
            headers["content-length"] = str(100 * len(CHUNK) + 16)
        return httpx.Response(200, headers=headers, stream=bodies[-1])

    http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    client = LangfuseClient(make_settings(max_answer_bytes=50_000), clock=clock, http=http)
    answers: list[int] = []
    try:
        listener = progress.reported_to(lambda _: answers.append(1))
        with listener, pytest.raises(LangfuseAnswerTooLarge, match="50000 bytes"):
            await client.transport.plain(HEALTH_ENDPOINT, "/api/public/health")
    finally:
        await client.aclose()
    assert len(bodies) == 1  # not retried: the same request would get the same answer
    assert answers  # an answer all the same: the tick is moving (liveness)
    assert bodies[0].read == (0 if declared else 6)  # 60 kB read of 1 MB; nothing when the length was declared


async def test_an_answer_within_the_cap_is_read_whole(clock: FakeClock) -> None:
    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=_Body())

    http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    client = LangfuseClient(make_settings(max_answer_bytes=2_000_000), clock=clock, http=http)
    try:
        answer = await client.transport.plain(HEALTH_ENDPOINT, "/api/public/health")
    finally:
        await client.aclose()
    assert answer.body == {"status": "OK"}

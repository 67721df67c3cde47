"""Fixtures: a contract-checking fake Langfuse (v4 or v3), a fake clock, and clients wired to both."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import respx
from pydantic import SecretStr

from tests.langfuse.fake import BASE_URL, FakeClock, FakeLangfuse, V3Server, V4Server
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import ApiGeneration, LangfuseClient, ServerCapabilities

SECRET = "sk-lf-very-secret-0123456789"
PUBLIC = "pk-lf-test-public"


@pytest.fixture
def fake() -> Iterator[FakeLangfuse]:
    with respx.mock(assert_all_called=False) as router:
        server = FakeLangfuse(router)
        yield server
    assert not server.violations, "contract violations:\n" + "\n".join(server.violations)


@pytest.fixture
def v4(fake: FakeLangfuse) -> V4Server:
    return V4Server(fake)


@pytest.fixture
def v3(fake: FakeLangfuse) -> V3Server:
    return V3Server(fake)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_settings(**overrides: Any) -> LangfuseSettings:
    values: dict[str, Any] = {"base_url": BASE_URL, "public_key": PUBLIC, "secret_key": SecretStr(SECRET)}
    values.update(overrides)
    return LangfuseSettings(**values)


MakeClient = Callable[..., LangfuseClient]


@pytest.fixture
async def make_client(clock: FakeClock) -> AsyncIterator[MakeClient]:
    """``make_client(generation=ApiGeneration.V4, version=None, **settings)``: a client on the fake (no
    start-up calls), speaking to a server of ``version`` (default: the fake's, 4.60.0 or 3.120.0)."""
    clients: list[LangfuseClient] = []

    def build(generation: ApiGeneration | None = None, version: str | None = None, **overrides: Any) -> LangfuseClient:
        client = LangfuseClient(make_settings(**overrides), clock=clock)
        if generation is not None:
            default = "4.60.0" if generation is ApiGeneration.V4 else "3.120.0"
            client.use_generation(generation, ServerCapabilities.from_version(version or default))
        clients.append(client)
        return client

    yield build
    for client in clients:
        await client.aclose()

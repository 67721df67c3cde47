"""Fixtures: clients wired to the in-process Langfuse stand-in (``v4``, ``v3``, ``make_langfuse`` and
``clock`` come from :mod:`tests.support.fixtures`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_client import MakeClient, make_settings
from trace_scorer.langfuse import ApiGeneration, LangfuseClient, ServerCapabilities


@pytest.fixture
async def make_client(clock: FakeClock) -> AsyncIterator[MakeClient]:
    """``make_client(generation=ApiGeneration.V4, version=None, **settings)``: a client on the stand-in (no
    start-up calls), speaking to a server of ``version`` (default: 4.60.0 or 3.120.0, the ``v4`` / ``v3``
    fixtures' versions)."""
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

"""Fixtures of the tests on the loopback stand-ins (``tests/integration/standins``, and the adapter tests that
run over real HTTP): stand-ins in background threads, checked for contract violations when the test ends,
and adapter clients wired to them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from pydantic import SecretStr

from standins.generate import Scenario
from standins.handles import LangfuseHandle, OpenAIHandle, StandinHandle, start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from tests.support.langfuse_client import MakeClient
from tests.support.standins import StartLangfuse, StartOpenAI, small_scenario
from trace_scorer.config.langfuse import LangfuseRetrySettings, LangfuseSettings
from trace_scorer.langfuse import LangfuseClient


def stop_all(handles: Sequence[StandinHandle]) -> list[str]:
    """Stop the stand-ins a test left running; the violations they saw (one the test stopped itself, it
    checked itself)."""
    problems: list[str] = []
    for handle in handles:
        if handle.stopped:
            continue
        try:
            problems += handle.violations()
        finally:
            handle.stop()
    return problems


@pytest.fixture
def start_lf() -> Iterator[StartLangfuse]:
    """``start_lf(generation="v4", scenario=…, mode="thread", **options)``; no contract violation allowed."""
    handles: list[LangfuseHandle] = []

    def start(*, mode: str = "thread", scenario: Scenario | None = None, **options: Any) -> LangfuseHandle:
        handle = start_langfuse(LangfuseOptions(scenario=scenario or small_scenario(), **options), mode=mode)
        handles.append(handle)
        return handle

    yield start
    problems = stop_all(handles)
    assert not problems, "contract violations:\n" + "\n".join(problems)


@pytest.fixture
def start_llm() -> Iterator[StartOpenAI]:
    handles: list[OpenAIHandle] = []

    def start(*, mode: str = "thread", **options: Any) -> OpenAIHandle:
        handle = start_openai(OpenAIOptions(**options), mode=mode)
        handles.append(handle)
        return handle

    yield start
    problems = stop_all(handles)
    assert not problems, "request/answer violations:\n" + "\n".join(problems)


@pytest.fixture
async def client_for() -> AsyncIterator[MakeClient]:
    """``client_for(handle, **settings)``: the adapter on the stand-in, retries shortened for tests."""
    clients: list[LangfuseClient] = []

    def make(handle: LangfuseHandle, *, secret: str | None = None, **overrides: Any) -> LangfuseClient:
        values: dict[str, Any] = {
            "base_url": handle.url,
            "public_key": handle.public_key,
            "secret_key": SecretStr(secret or handle.secret_key),
            "timeout": 10.0,
            "retry": LangfuseRetrySettings(initial=0.02, max=0.2, max_attempts=10),
        }
        values.update(overrides)
        client = LangfuseClient(LangfuseSettings(**values))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()

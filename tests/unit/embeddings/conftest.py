"""Fixtures: a respx-mocked OpenAI-compatible embeddings endpoint, embedders whose waits are recorded, not
slept, and a scripted in-memory embedder for the metric tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import respx

from tests.embeddings.helpers import EmbeddingsAPI, settings
from trace_scorer.embeddings import EmbeddingModels, build_embedder


class SleepRecorder:
    """Stands in for asyncio.sleep: records the waits and advances a virtual clock, returning at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._slept = 0.0

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._slept += seconds

    def clock(self) -> float:
        return time.monotonic() + self._slept


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def api() -> Any:
    scripted = EmbeddingsAPI()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        mock.post(url__regex=r".*/embeddings$").mock(side_effect=scripted)
        yield scripted


EmbedderFactory = Callable[..., Awaitable[EmbeddingModels]]


@pytest.fixture
async def make_embedder(sleeps: SleepRecorder) -> AsyncIterator[EmbedderFactory]:
    built: list[EmbeddingModels] = []

    async def factory(*providers: dict[str, Any], **embeddings: Any) -> EmbeddingModels:
        environ = {p["api_key_env"]: "sk-test" for p in providers if p.get("api_key_env")}
        embedder = build_embedder(settings(*providers, **embeddings), environ=environ, sleep=sleeps, clock=sleeps.clock)
        assert isinstance(embedder, EmbeddingModels)
        built.append(embedder)
        return embedder

    yield factory
    for embedder in built:
        await embedder.aclose()

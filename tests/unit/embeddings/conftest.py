"""Fixtures: a respx-mocked OpenAI-compatible embeddings endpoint, and embedders whose waits are recorded,
not slept (``sleeps`` comes from :mod:`tests.support.fixtures`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import respx

from tests.support.clocks import SleepRecorder
from tests.support.embeddings import EmbedderFactory, EmbeddingsAPI, settings
from trace_scorer.embeddings import EmbeddingModels, build_embedder


@pytest.fixture
def api() -> Any:
    scripted = EmbeddingsAPI()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        mock.post(url__regex=r".*/embeddings$").mock(side_effect=scripted)
        yield scripted


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

"""respx helpers: a scripted OpenAI-compatible ``POST /v1/embeddings``, and embedders that need no network."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from trace_scorer.config.settings import Settings
from trace_scorer.embeddings import EmbeddingModels

Reply = httpx.Response | Callable[[dict[str, Any]], httpx.Response]


def vector_of(text: str, dimensions: int = 8) -> list[float]:
    """A deterministic vector per text (so a test can tell which text a returned vector belongs to)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255 - 0.5 for b in digest[:dimensions]]


def embeddings_response(
    vectors: Sequence[Sequence[float]],
    *,
    model: str = "m",
    prompt_tokens: int | None = 10,
    indexes: Sequence[int] | None = None,
) -> httpx.Response:
    """A ``list`` of ``embedding`` objects in the OpenAI wire shape."""
    order = list(indexes) if indexes is not None else list(range(len(vectors)))
    body: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": list(vectors[i])} for i in order],
    }
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return httpx.Response(200, json=body)


def error(status: int, message: str = "error", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": "x"}}, headers=headers)


class EmbeddingsAPI:
    """Answers ``POST /embeddings`` with :func:`vector_of` each input (or a scripted reply); records requests.

    ``script`` replies are used first, in order; after them every request is answered normally. A text
    in ``refuse`` makes a request that contains it fail with 400 (as an input over the model's limit does).
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []
        self.urls: list[str] = []
        self.script: list[Reply] = []
        self.refuse: set[str] = set()
        self.vectors: dict[str, list[float]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        self.urls.append(str(request.url))
        if self.script:
            reply = self.script.pop(0)
            return reply if isinstance(reply, httpx.Response) else reply(body)
        inputs: list[str] = body["input"]
        if self.refuse & set(inputs):
            return error(400, "This model's maximum context length is 8192 tokens")
        vectors = [self.vectors.get(text) or vector_of(text) for text in inputs]
        return embeddings_response(vectors, model=body["model"], prompt_tokens=sum(len(t.split()) for t in inputs))

    @property
    def inputs(self) -> list[list[str]]:
        """The texts of each request, in order."""
        return [body["input"] for body in self.requests]


def settings(*providers: dict[str, Any], **embeddings: Any) -> Settings:
    return Settings(providers=list(providers), embeddings=embeddings)


def provider(name: str, *models: str, base_url: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "base_url": base_url or f"https://{name}.test/v1",
        "api_key_env": f"{name.upper()}_KEY",
        "embedding_models": list(models),
        **extra,
    }


def unit(degrees: float) -> list[float]:
    """A 2-D unit vector at ``degrees``: its cosine with ``unit(0)`` is cos(degrees)."""
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


class ScriptedEmbedder:
    """An :class:`Embedder` from a table text → vector (no network); records what it was asked."""

    def __init__(self, vectors: Mapping[str, Sequence[float]], model_id: str = "test/vectors") -> None:
        self._vectors = {text: list(v) for text, v in vectors.items()}
        self._model_id = model_id
        self.asked: list[list[str]] = []
        self.closed = False

    @property
    def model_id(self) -> str:
        return self._model_id

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked.append(list(texts))
        return [self._vectors[text] if text in self._vectors else vector_of(text) for text in texts]

    async def aclose(self) -> None:
        self.closed = True


EmbedderFactory = Callable[..., Awaitable[EmbeddingModels]]

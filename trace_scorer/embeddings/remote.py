"""Embedding models behind a provider's OpenAI-compatible ``POST /embeddings`` endpoint.

The transport is the providers' (trace_scorer.providers, shared with the judge): the ``openai`` client
over the provider's pooled aiohttp client (``open_client``), the tenacity retry policy that honours ``Retry-After``
(``RetryPolicy``), and per-provider bounds on requests in flight and per minute with a pause after a 429
(``ProviderLimits``). One :class:`EmbeddingProvider` per provider is shared by all its embedding models; its bounds
are separate from the judge's chat calls to the same provider. Each request has a total deadline (the
provider's ``request_deadline``), retried like a timeout; every retry is logged (``embeddings.retry``)
and told to :attr:`EmbeddingProvider.on_retry` (the worker's metrics).

Some servers answer a vector per *token* for each input (llama-cpp-python's server with a model that
has no pooling); those are mean-pooled into one vector per input, as sentence-transformers pools.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import openai
import structlog
from openai.types import CreateEmbeddingResponse

from trace_scorer.config.judge import ProviderSettings
from trace_scorer.embeddings.base import BatchResult, EmbeddingError
from trace_scorer.providers.client import HttpClient, describe_error, open_client, provider_limits, send_retrying
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.providers.retry import RetryPolicy, retry_status
from trace_scorer.providers.usage import Usage
from trace_scorer.runtime.retry import Sleep

#: Refusals that are about what the request holds (too long a text, too many tokens in one request).
_PER_INPUT_STATUSES = frozenset({400, 413, 422})

log = structlog.get_logger(__name__)


class EmbeddingProvider:
    """One provider's embeddings endpoint: its client, its limits, its retries."""

    def __init__(
        self,
        settings: ProviderSettings,
        api_key: str,
        retry: RetryPolicy,
        *,
        sleep: Sleep,
        clock: Callable[[], float] = time.monotonic,
        deadline: Deadline = system_deadline,
        http_client: HttpClient | None = None,
    ) -> None:
        self.name = settings.name
        #: Bounds each HTTP request in all (``settings.deadline`` seconds, the answer's body included).
        self.deadline = deadline
        #: Told of every retry: model ``provider/model-id``, the failed attempt's status (HTTP code,
        #: ``timeout``, ``connection_error``) and the wait before the next attempt.
        self.on_retry: Callable[[str, str, float], None] | None = None
        self.settings = settings
        self.limits = provider_limits(settings, sleep, clock)
        self._retry = retry
        self._http, self._client = open_client(settings, api_key, http_client)
        self._closed = False

    async def embed(self, model_id: str, texts: Sequence[str]) -> BatchResult:
        """One request (retried on 429/5xx/timeouts) for the vectors of ``texts``, in order."""
        ref = f"{self.name}/{model_id}"

        def retried(error: BaseException | None, attempt: int, wait: float) -> None:
            status = retry_status(error)
            log.warning(
                "embeddings.retry",
                model=ref,
                status=status,
                attempt=attempt,
                wait_seconds=round(wait, 3),
                error=describe_error(error) if error is not None else None,
            )
            if self.on_retry is not None:
                self.on_retry(ref, status, wait)

        retrying = self._retry.lazy(on_retry_after=self.limits.pause, on_retry=retried)
        url = f"{self.settings.base_url}/embeddings"
        # Plain JSON through the SDK's documented ``post`` (as the judge's chat calls: chat.py says why).
        body = {"model": model_id, "input": list(texts), "encoding_format": "float"}
        try:
            response = await send_retrying(
                retrying,
                self.limits,
                self.deadline,
                self.settings.deadline,
                url,
                lambda: self._client.post("/embeddings", body=body, cast_to=CreateEmbeddingResponse),
            )
        except openai.OpenAIError as exc:
            attempts = retrying.attempts
            per_input = isinstance(exc, openai.APIStatusError) and exc.status_code in _PER_INPUT_STATUSES
            times = "attempt" if attempts == 1 else "attempts"
            raise EmbeddingError(ref, f"{describe_error(exc)} (after {attempts} {times})", per_input=per_input) from exc
        usage = Usage(calls=1, cost=None)  # an endpoint that reports no usage: tokens and cost unknown
        if response.usage is not None:
            tokens = response.usage.prompt_tokens or 0
            price = self.settings.prices.get(model_id)
            usage = Usage(tokens, 0, 1, price.cost(tokens, 0) if price else None)
        data = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in data] != list(range(len(texts))):
            raise EmbeddingError(
                ref, f"the endpoint answered {len(data)} vectors for {len(texts)} texts", usage=usage
            )
        try:
            vectors = [pooled(item.embedding) for item in data]
        except ValueError as exc:
            raise EmbeddingError(ref, f"the endpoint answered {exc}", usage=usage) from None
        if len({v.shape for v in vectors}) > 1:
            raise EmbeddingError(ref, "the endpoint answered vectors of different lengths", usage=usage)
        return BatchResult(vectors, usage)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._client.close()
        await self._http.aclose()


def pooled(embedding: object) -> npt.NDArray[np.float32]:
    """One input's vector: as answered, or the mean of its per-token vectors (a list of vectors)."""
    try:
        array = np.asarray(embedding, dtype=np.float32)
    except ValueError:  # ragged: per-token vectors of different lengths
        raise ValueError("per-token vectors of different lengths") from None
    if array.ndim == 2 and array.shape[0] > 0:
        mean: npt.NDArray[np.float32] = array.mean(axis=0, dtype=np.float32)
        return mean
    if array.ndim != 1 or array.shape[0] == 0:
        raise ValueError(f"an embedding of shape {array.shape}, not a vector")
    return array


class RemoteBackend:
    """One embedding model of an :class:`EmbeddingProvider` (which its owner closes)."""

    def __init__(self, endpoint: EmbeddingProvider, model_id: str) -> None:
        self._endpoint = endpoint
        self._model = model_id

    @property
    def model_id(self) -> str:
        return f"{self._endpoint.name}/{self._model}"

    async def embed_batch(self, texts: Sequence[str]) -> BatchResult:
        return await self._endpoint.embed(self._model, texts)

    async def aclose(self) -> None:
        """Nothing of its own: the endpoint is shared by the provider's models and closed by its owner."""

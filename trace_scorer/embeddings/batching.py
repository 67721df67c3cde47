"""An :class:`Embedder` over a backend: each text embedded once, concurrent asks gathered into batches.

Samples are scored concurrently and each asks for two texts (its response and the expected answer), so
one request per ask would send many tiny requests. Instead every text waits a few milliseconds
(``linger``) for other samples' texts and is sent in batches of ``batch_size``; a text already embedded
or on its way is not sent again (an LRU cache of ``cache_size`` texts, plus in-flight sharing). Failures
are never cached: the next ask tries again. When the endpoint refuses a batch for its content (e.g. one
text over the model's input limit) the batch is split in halves and retried, so one bad text fails
only the samples that contain it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from trace_scorer.embeddings.base import Backend, EmbeddingError, Vector
from trace_scorer.providers.futures import FutureLRU
from trace_scorer.providers.usage import Usage
from trace_scorer.runtime.logs import get_logger

log = get_logger(__name__)

#: How long a text waits for others to share its request (seconds).
DEFAULT_LINGER = 0.005


class BatchingEmbedder:
    """Embeds texts with one backend; the :class:`Embedder` metrics see."""

    def __init__(self, backend: Backend, *, batch_size: int, cache_size: int, linger: float = DEFAULT_LINGER) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._backend = backend
        self._batch_size = batch_size
        self._linger = linger
        #: text → its vector (done) or the request that will bring it (pending), oldest use first.
        self._vectors: FutureLRU[str, Vector] = FutureLRU(cache_size)
        self._queue: list[tuple[str, asyncio.Future[Vector]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._closed = False
        #: What the backend's requests cost so far (tokens, requests, USD when priced).
        self.usage = Usage()

    @property
    def model_id(self) -> str:
        return self._backend.model_id

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._closed:
            raise RuntimeError(f"embedder {self.model_id} is closed")
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        for text in texts:
            if not text.strip():
                raise ValueError("cannot embed an empty text")
        futures = [self._future(text) for text in texts]
        self._dispatch()
        # shield: one asker being cancelled must not cancel a request other askers wait for.
        return [(await asyncio.shield(future)).tolist() for future in futures]

    @property
    def hits(self) -> int:
        """Texts served from the cache or from a request already on its way."""
        return self._vectors.hits

    @property
    def misses(self) -> int:
        """Texts that were sent."""
        return self._vectors.misses

    def _future(self, text: str) -> asyncio.Future[Vector]:
        known = self._vectors.known(text)
        if known is not None:
            return known
        future = self._vectors.start(text)
        self._queue.append((text, future))
        return future

    def _dispatch(self) -> None:
        """Send full batches now; leave the rest to wait ``linger`` for company."""
        while len(self._queue) >= self._batch_size:
            self._send(self._queue[: self._batch_size])
            del self._queue[: self._batch_size]
        if self._queue and self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        try:
            await asyncio.sleep(self._linger)
        finally:
            self._flusher = None
        queue, self._queue = self._queue, []
        for start in range(0, len(queue), self._batch_size):
            self._send(queue[start : start + self._batch_size])

    def _send(self, batch: list[tuple[str, asyncio.Future[Vector]]]) -> None:
        task = asyncio.create_task(self._request(batch))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _request(self, batch: list[tuple[str, asyncio.Future[Vector]]]) -> None:
        texts = [text for text, _ in batch]
        try:
            result = await self._backend.embed_batch(texts)
            if len(result.vectors) != len(texts):
                raise EmbeddingError(
                    self.model_id, f"the endpoint answered {len(result.vectors)} vectors for {len(texts)} texts"
                )
        except EmbeddingError as exc:
            if exc.usage is not None:
                self.usage += exc.usage  # the request was made and answered: it counts
            if exc.per_input and len(batch) > 1:
                log.info("embeddings.batch_split", model=self.model_id, size=len(batch), error=exc.message)
                middle = len(batch) // 2
                await asyncio.gather(self._request(batch[:middle]), self._request(batch[middle:]))
                return
            self._fail(batch, exc)
            return
        except asyncio.CancelledError:
            self._fail(batch, None)
            raise
        except Exception as exc:  # a backend bug must not leave askers waiting forever
            log.exception("embeddings.backend_error", model=self.model_id)
            self._fail(batch, EmbeddingError(self.model_id, f"{type(exc).__name__}: {exc}"))
            return
        self.usage += result.usage
        for (_, future), vector in zip(batch, result.vectors, strict=True):
            if not future.done():
                future.set_result(vector)
        self._vectors.evict()

    def _fail(self, batch: list[tuple[str, asyncio.Future[Vector]]], exc: BaseException | None) -> None:
        for text, future in batch:
            self._vectors.forget(text, future)  # never cache a failure
            if future.done():
                continue
            if exc is None:
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning when every asker has gone

    def stats(self) -> dict[str, Any]:
        """Texts sent and served from the cache, requests, and tokens and cost where the endpoint reports them."""
        out: dict[str, Any] = {"texts_embedded": self.misses, "cache_hits": self.hits, "requests": self.usage.calls}
        if self.usage.prompt_tokens:
            out["tokens"] = self.usage.prompt_tokens
        if self.usage.cost is not None and self.usage.cost > 0:
            out["cost_usd"] = round(self.usage.cost, 8)
        return out

    async def aclose(self) -> None:
        """Cancel what is still queued or on its way, then close the backend. Idempotent."""
        if self._closed:
            return
        self._closed = True
        tasks = [t for t in (self._flusher, *self._requests) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for _, future in self._queue:
            future.cancel()
        self._queue.clear()
        self._vectors.clear()
        if self.misses:
            log.info("embeddings.usage", model=self.model_id, **self.stats())
        await self._backend.aclose()

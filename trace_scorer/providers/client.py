"""One OpenAI-compatible endpoint's client: the ``openai`` async client over a pooled httpx client.

``max_retries=0``: tenacity (trace_scorer.providers.retry) is the only retry layer, so waits are ours to
honour and count. Used by the judge's chat calls and the embeddings' ``/embeddings`` calls alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
import openai
from tenacity import AsyncRetrying

from trace_scorer.config.judge import ProviderSettings
from trace_scorer.providers.deadline import Deadline
from trace_scorer.providers.limits import ProviderLimits

T = TypeVar("T")


class RequestDeadlineExceeded(openai.APITimeoutError):
    """No complete answer within the request's total deadline: counted and retried like a timeout."""

    def __init__(self, url: str, seconds: float) -> None:
        super().__init__(request=httpx.Request("POST", url))  # type: ignore[arg-type]  # openai types httpx2
        self.seconds = seconds
        self.message = f"no complete answer within {seconds:g}s (request_deadline)"


async def within_deadline(deadline: Deadline, seconds: float, url: str, call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, given ``seconds`` in all (reading the answer included); running out raises
    :class:`RequestDeadlineExceeded` (an ``openai.APITimeoutError``: transient, so retried)."""
    try:
        async with deadline(seconds):
            return await call()
    except TimeoutError:
        raise RequestDeadlineExceeded(url, seconds) from None


async def send_retrying(
    retrying: AsyncRetrying,
    limits: ProviderLimits,
    deadline: Deadline,
    seconds: float,
    url: str,
    call: Callable[[], Awaitable[T]],
) -> T:
    """``await call()`` under the provider's retry policy: each attempt in one of the provider's slots and
    within the request deadline. The last error is raised once the retries run out."""
    async for attempt in retrying:
        with attempt:
            async with limits.slot():
                return await within_deadline(deadline, seconds, url, call)
    raise AssertionError("tenacity ends with a result or the last error")  # pragma: no cover


def describe_error(exc: BaseException) -> str:
    """A short, log-safe description of a transport failure (no request bodies, no keys)."""
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"[:300]
    if isinstance(exc, RequestDeadlineExceeded):
        return exc.message
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection error: {cause or exc}"[:300]
    return f"{type(exc).__name__}: {exc}"[:300]


def open_client(
    settings: ProviderSettings, api_key: str, http_client: httpx.AsyncClient | None = None
) -> tuple[httpx.AsyncClient, openai.AsyncOpenAI]:
    """An ``openai`` client for the endpoint, over an httpx client whose pool fits its concurrency.

    ``max_retries=0``: tenacity (RetryPolicy) is the only retry layer. The httpx client is returned so the
    caller closes it with the openai client (``await client.close(); await http.aclose()``).
    """
    pool = httpx.Limits(max_connections=settings.max_concurrency, max_keepalive_connections=settings.max_concurrency)
    http = http_client or httpx.AsyncClient(limits=pool, timeout=settings.timeout)
    client = openai.AsyncOpenAI(
        base_url=settings.base_url,
        api_key=api_key,
        timeout=settings.timeout,
        max_retries=0,
        # A (legacy) httpx client, which openai accepts: its pool is sized to the provider's
        # concurrency, and it is the transport respx mocks in the tests.
        http_client=http,  # type: ignore[arg-type]
        default_headers=settings.headers or None,
    )
    return http, client

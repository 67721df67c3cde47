"""One OpenAI-compatible endpoint's client: the ``openai`` async client over the providers' HTTP transport.

``max_retries=0``: tenacity (trace_scorer.providers.retry) is the only retry layer, so waits are ours to
honour and count. The transport is aiohttp (``transport.py``: why, and how its errors are named). Used by
the judge's chat calls and the embeddings' ``/embeddings`` calls alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any, TypeVar

import httpx
import httpx2
import openai
from tenacity import AsyncRetrying

from trace_scorer.config.judge import ProviderSettings
from trace_scorer.providers import transport
from trace_scorer.providers.deadline import Deadline
from trace_scorer.providers.limits import ProviderLimits, request_priority
from trace_scorer.runtime.logs import redact_text
from trace_scorer.runtime.retry import Sleep, run_retrying

#: What the openai client can send through: the providers' aiohttp client, or (tests) an httpx one.
HttpClient = httpx2.AsyncClient | httpx.AsyncClient

T = TypeVar("T")


class RequestDeadlineExceeded(openai.APITimeoutError):
    """No complete answer within the request's total deadline: counted and retried like a timeout."""

    def __init__(self, url: str, seconds: float) -> None:
        super().__init__(request=httpx2.Request("POST", url))
        self.seconds = seconds
        self.message = f"no complete answer within {seconds:g}s (request_deadline)"


async def send_retrying(
    retrying: AsyncRetrying | Callable[[], AsyncRetrying],
    limits: ProviderLimits,
    deadline: Deadline,
    seconds: float,
    url: str,
    call: Callable[[], Awaitable[T]],
) -> T:
    """``await call()`` under the provider's retry policy: each attempt in one of the provider's slots and
    within the request deadline. The last error is raised once the retries run out.

    A timed-out attempt keeps its slot as long again before it is retried: a server that queues (llama.cpp,
    Ollama) finishes requests whose client gave up, so a retry sent at once would wait behind it and a
    timeout would multiply the server's work. Every attempt asks for its slot with the request's priority,
    so a retry is not queued behind requests asked after it."""
    priority = request_priority()

    # One coroutine a try, the slot taken and given back and the deadline entered inline: every layer of
    # the await chain is walked again each time the answer's bytes arrive (~1 % of the CPU a judged trace).
    async def attempt() -> T:
        await limits.enter(priority)
        try:
            started = limits.now()
            try:
                try:
                    async with deadline(seconds):  # the answer's body included
                        answer = await call()
                except TimeoutError:
                    raise RequestDeadlineExceeded(url, seconds) from None
            except openai.APITimeoutError:
                limits.timed_out()
                await limits.hold(limits.now() - started)
                raise
            limits.answered(limits.now() - started)
            return answer
        finally:
            await limits.leave()

    return await run_retrying(retrying, attempt)


def describe_error(exc: BaseException) -> str:
    """A short, log-safe description of a transport failure (no request bodies, no keys, no password of a
    ``base_url`` with user info: the transport's own text may quote the URL)."""
    return redact_text(_describe(exc))[:300]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, RequestDeadlineExceeded):
        return exc.message
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection error: {cause or exc}"
    return f"{type(exc).__name__}: {exc}"


def provider_limits(settings: ProviderSettings, sleep: Sleep, clock: Callable[[], float]) -> ProviderLimits:
    """A provider's traffic bounds from its settings: one place for the chat and the embeddings clients."""
    return ProviderLimits(
        settings.max_concurrency,
        settings.requests_per_minute,
        sleep=sleep,
        clock=clock,
        adaptive=settings.adaptive_concurrency,
    )


#: Distinct header sets kept per client (retry counts times timeouts: a handful in practice).
_MAX_HEADER_SETS = 64
#: Timeouts a request's headers may be kept for: numbers, none, or the client's (``NOT_GIVEN``).
_PLAIN_TIMEOUTS = (int, float, type(None), openai.NotGiven)


class AsyncOpenAI(openai.AsyncOpenAI):
    """The SDK's client, with each absolute request URL parsed once and each distinct set of request headers
    built once. Named as the SDK's: its User-Agent header is the client class's name."""

    @cached_property
    def _headers_built(self) -> dict[tuple[Any, ...], httpx2.Headers]:
        """:meth:`_build_headers`'s sets, by their inputs."""
        return {}

    def _build_headers(self, options: Any, *, retries_taken: int = 0) -> httpx2.Headers:
        """The SDK's own headers for a request, built by the SDK once per distinct input and copied for each
        request (the SDK may change its copy). Besides the client's fixed headers (the platform's, the custom
        ones, the async library, which the aiohttp transport makes asyncio) they follow from the API key, the
        request's security options, its retry count and its read timeout: merging and validating them again
        on every call was ~3.5 % of a judged trace's CPU samples. A request with headers of its own, a
        timeout that is no plain number, or headers that carry its idempotency key, is built by the SDK every
        time. tests/unit/providers/test_request_bodies.py holds the result to the SDK's own."""
        timeout = options.timeout
        if options.headers or not isinstance(timeout, _PLAIN_TIMEOUTS) or not isinstance(self.timeout, _PLAIN_TIMEOUTS):
            return super()._build_headers(options, retries_taken=retries_taken)
        key = (retries_taken, timeout, self.timeout, self.api_key, tuple(options.security.items()))
        built = self._headers_built.get(key)
        if built is not None:
            return httpx2.Headers(built)
        built = super()._build_headers(options, retries_taken=retries_taken)
        per_request = options.idempotency_key is not None and options.idempotency_key in built.values()
        if not per_request and len(self._headers_built) < _MAX_HEADER_SETS:
            self._headers_built[key] = httpx2.Headers(built)
        return built

    def _prepare_url(self, url: str) -> httpx2.URL:
        """The SDK's own URL for ``url``: an absolute URL is the SDK's ``URL(url)``, parsed once per distinct
        text (``httpx2.URL`` is immutable; the SDK parsed the judge's chat URL on every call, ~2.3 % of a
        judged trace's CPU samples); a relative one is joined to the base URL by the SDK, as before. Should the
        SDK rename the hook, the URLs are parsed by the SDK again (tests/unit/providers/test_request_bodies.py
        fails on the rename)."""
        parsed = transport.parsed_url(url)
        return super()._prepare_url(url) if parsed.is_relative_url else parsed


def open_client(
    settings: ProviderSettings, api_key: str, http_client: HttpClient | None = None
) -> tuple[HttpClient, openai.AsyncOpenAI]:
    """An ``openai`` client for the endpoint, over ``http_client`` or the provider's own pooled aiohttp
    client (``transport.pooled_http_client``: one pool per provider, sized to its concurrency).

    ``max_retries=0``: tenacity (RetryPolicy) is the only retry layer. The HTTP client is returned so the
    caller closes it with the openai client (``await client.close(); await http.aclose()``).
    """
    http = http_client if http_client is not None else transport.pooled_http_client(settings)
    client = AsyncOpenAI(
        base_url=settings.base_url,
        api_key=api_key,
        timeout=settings.timeout,
        max_retries=0,
        # openai accepts a (legacy) httpx client too: the tests' respx and MockTransport seams.
        http_client=http,  # type: ignore[arg-type]
        default_headers=settings.headers or None,
    )
    return http, client

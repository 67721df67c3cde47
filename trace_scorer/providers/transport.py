"""The HTTP transport under the providers' ``openai`` clients: aiohttp, through the SDK's ``DefaultAioHttpClient``.

Why aiohttp: with 32 requests in flight, the SDK over httpx spent ~1.9 ms of CPU a chat completion on
loopback (httpcore's send path and its connection-pool bookkeeping, which grows with the pool); over the
SDK's aiohttp transport ~1.3 ms (``bench/bench_llm_client.py``). One client, and so one aiohttp
connection pool sized to the provider's ``max_concurrency``, per provider.

The SDK's adapter maps every ``aiohttp.ClientConnectionError`` it does not know better to
``ConnectTimeout``, so a refused connection or a server that hangs up would reach us as "request timed
out". :class:`_ConnectionErrorsNamed` names them as httpx does (``ConnectError``, ``RemoteProtocolError``:
``openai.APIConnectionError`` above), so descriptions and retry labels stay what they were; a real
timeout stays a timeout.

The answer's body is read there too, whole (:func:`_read_whole`): the providers only ever ask for whole
answers, and httpx2's read of it through its asynchronous streaming layers took ~4 % of a judged trace's
CPU samples (py-spy, ``bench_worker.py --profile``), read here ~3 %. The providers' client parses each URL
once (:func:`parsed_url`) and places each distinct header list once (:func:`_leading_headers`): httpx2's merge
and ``Request``'s header placing rescan the list for every header, ~3 % of a judged trace's CPU samples.
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import Any

import aiohttp
import httpx2
import openai

from trace_scorer.config.judge import ProviderSettings


class _ConnectionErrorsNamed(httpx2.AsyncBaseTransport):
    """Wraps the aiohttp transport: a connection failure that is not a timeout is not called one."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.ConnectTimeout as exc:
            cause = exc.__cause__
            if not isinstance(cause, aiohttp.ClientConnectionError) or isinstance(cause, asyncio.TimeoutError):
                raise
            if isinstance(cause, aiohttp.ServerDisconnectedError):
                raise httpx2.RemoteProtocolError(f"{cause} without sending a response", request=request) from cause
            raise httpx2.ConnectError(str(cause), request=request) from cause
        return await _read_whole(response)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _read_whole(response: httpx2.Response) -> httpx2.Response:
    """``response`` with its body read: what httpx2's ``send`` does next for a call that does not stream
    (the SDK's ``post`` without ``stream``), without httpx2's asynchronous streaming layers. The aiohttp
    stream is read and closed as httpx2 would read and close it, and its errors are the ones httpx2 would
    have raised from it (named by the SDK's stream as before, not renamed as above); the bytes are then
    decoded (Content-Encoding) by httpx2's own ``read``, the headers untouched."""
    stream = response.stream
    if not isinstance(stream, httpx2.AsyncByteStream):
        return response
    try:
        body = b"".join([chunk async for chunk in stream])
    finally:
        await stream.aclose()
    response.stream = httpx2.ByteStream(body)
    response.read()
    return response


@lru_cache(maxsize=64)
def parsed_url(url: str) -> httpx2.URL:
    """``url`` parsed, once per distinct URL (a provider has a few; ``httpx2.URL`` is immutable)."""
    return httpx2.URL(url)


@lru_cache(maxsize=64)
def _target(url: str) -> tuple[httpx2.URL, bytes | None]:
    """``url`` parsed, and the ``Host`` header httpx2's ``Request`` gives it (its ``netloc``) when httpx2's
    ``build_request`` takes it as is (absolute, with a host), else None: once per distinct URL (the ``netloc``
    and the checks were ~15 % of a plain request's building)."""
    parsed = parsed_url(url)
    return parsed, parsed.netloc if parsed.is_absolute_url and parsed.host else None


#: Header lists as the SDK hands them over: (name, value) text pairs.
_HeaderPairs = tuple[tuple[str, str], ...]
#: ``build_request``'s arguments the SDK passes for a request without files or a form (:meth:`_plain`).
_PLAIN_ARGUMENTS = frozenset({"headers", "content", "files", "params", "timeout"})
#: Headers httpx2's ``Request`` places itself (the host first, the body's length last).
_PLACED = ("Host", "Content-Length", "Transfer-Encoding")


@lru_cache(maxsize=64)
def _leading_headers(
    defaults: tuple[tuple[bytes, bytes], ...], given: _HeaderPairs, host: bytes
) -> httpx2.Headers | None:
    """A plain request's headers but its ``Content-Length``: ``Host``, then the client's ``defaults`` with the
    request's ``given`` headers merged in by httpx2's own merge (its client's ``_merge_headers``: a copy of
    the client's headers, updated), as ``httpx2.Request`` orders them. None when the list names a header
    ``Request`` would place itself (then httpx2 builds the request). Once per distinct list: a provider's SDK
    hands over the same headers on every call (the retry count aside), and httpx2's merge and ``Request``'s
    header placing, a case-insensitive scan of the list per header, took ~3 % of a judged trace's CPU
    samples. Never mutated: it is copied for each request."""
    merged = httpx2.Headers(list(defaults))
    merged.update(list(given))
    if any(name in merged for name in _PLACED):
        return None
    return httpx2.Headers([(b"Host", host), *merged.raw])


class _AioHttpClient(openai.DefaultAioHttpClient):
    """The SDK's aiohttp-backed client with its transports (direct or through a proxy) wrapped."""

    def build_request(self, method: str, url: httpx2.URL | str, **kwargs: Any) -> httpx2.Request:
        """httpx2's request, from the URL parsed once: the SDK hands over the same few URLs as text on every
        call, and parsing one took ~2 % of a call's CPU (httpx2 merges a parsed URL as it merges the text).

        A plain request (an absolute URL with a host, :func:`_target`; no query, no cookies, no files, a body of
        bytes, a timeout given, :meth:`_plain`) is the ``httpx2.Request`` that httpx2's ``build_request`` makes
        of it: the same headers in the same order (:func:`_leading_headers`, then the body's length), the body
        read, the timeout as its extension. Any other goes through httpx2's ``build_request``."""
        if isinstance(url, str):
            parsed, host = _target(url)
        else:
            parsed, host = url, url.netloc if url.is_absolute_url and url.host else None
        given = kwargs.get("headers")
        content = kwargs.get("content")
        if (
            host is not None
            and isinstance(given, list)
            and isinstance(content, bytes)
            and content
            and self._plain(kwargs)
        ):
            leading = _leading_headers(tuple(self.headers.raw), tuple(given), host)
            if leading is not None:
                headers = httpx2.Headers(leading)
                headers["Content-Length"] = str(len(content))
                request = httpx2.Request(
                    method,
                    parsed,
                    headers=headers,
                    stream=httpx2.ByteStream(content),
                    extensions={"timeout": httpx2.Timeout(kwargs["timeout"]).as_dict()},
                )
                request.read()
                # What its headers' encoding check would find (the length is ASCII), known once per list.
                request.headers.encoding = leading.encoding
                return request
        return super().build_request(method, parsed, **kwargs)

    def _plain(self, kwargs: dict[str, Any]) -> bool:
        """Whether httpx2's ``build_request`` would merge no query parameters and no cookies, build no multipart
        body and take the timeout given (not the client's); the URL is checked by :func:`_target`."""
        return (
            kwargs.keys() <= _PLAIN_ARGUMENTS
            and kwargs.get("params") is None
            and kwargs.get("files") is None
            and "timeout" in kwargs
            and kwargs["timeout"] is not httpx2.USE_CLIENT_DEFAULT
            and not self.params
            and not self.cookies
        )

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _ConnectionErrorsNamed(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _ConnectionErrorsNamed(super()._init_proxy_transport(*args, **kwargs))


def pooled_http_client(settings: ProviderSettings) -> httpx2.AsyncClient:
    """The provider's HTTP client: aiohttp, at most ``max_concurrency`` connections, kept alive between
    requests; ``timeout`` bounds each connect and each read (aiohttp's ``sock_connect``, ``sock_read``:
    it has no write timeout), the whole request ``request_deadline`` (``providers/client.py``)."""
    pool = httpx2.Limits(max_connections=settings.max_concurrency, max_keepalive_connections=settings.max_concurrency)
    return _AioHttpClient(limits=pool, timeout=settings.timeout)

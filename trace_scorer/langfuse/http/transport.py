"""The one place requests leave for Langfuse: budget, retries, counters and error mapping.

One kind of call, :meth:`Transport.plain`: httpx with Basic auth, the SDK headers, the budget and
retries, returning the JSON as sent. Not the ``langfuse`` package's generated client: the legacy
endpoints are gone from it, older servers leave out fields its newest models require, observation pages
are too large to parse into its models, and its raw JSON is reachable only through private attributes.
Errors come out typed (:mod:`.errors`) with the server's message and never a secret.

Every attempt has a total deadline (``[langfuse] request_deadline``, else 3 × ``timeout``) around the whole
request, reading the body included: httpx's timeout bounds each read on its own, so a server trickling
bytes would otherwise hold a request (and the batch behind it) forever. Running out is counted and retried
like a timeout (status ``timeout``).

A long request is not a stuck worker: each request sent and each piece of an answer received is reported
as progress (:mod:`trace_scorer.runtime.progress`; liveness hears of it), so a server trickling a large page keeps
``/healthz`` passing while the read moves, and only a read that stops moving can fail it.

An answer is read a chunk at a time and stops once longer than ``max_answer_bytes``
(:class:`LangfuseAnswerTooLarge`): a 150 MB page of observations was read and parsed whole (618 MB peak).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from trace_scorer.data import jsonbytes
from trace_scorer.langfuse.errors import (
    LangfuseAnswerTooLarge,
    LangfuseAuthError,
    LangfuseHTTPError,
    LangfuseNotFoundError,
    LangfuseResponseError,
    LangfuseTransportError,
)
from trace_scorer.langfuse.http.clock import Clock, ServerTime
from trace_scorer.langfuse.http.endpoints import Endpoint
from trace_scorer.langfuse.http.retry import LangfuseRetryPolicy, RequestBudget, parse_retry_after
from trace_scorer.langfuse.http.stats import RequestStats
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.runtime import progress

QueryValue = str | int | bool | Sequence[str] | None

#: Without an explicit deadline, a request may take this many of the HTTP client's read timeouts in all.
DEADLINE_TIMEOUTS = 3

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PlainAnswer:
    """A 2xx (or accepted) answer of :meth:`Transport.plain`: status and the JSON body."""

    status: int
    body: Any


class Transport:
    def __init__(
        self,
        *,
        base_url: str,
        http: httpx.AsyncClient,
        auth: httpx.Auth,
        headers: Mapping[str, str],
        policy: LangfuseRetryPolicy,
        budget: RequestBudget,
        stats: RequestStats,
        clock: Clock,
        deadline: float | None = None,
        max_answer_bytes: int = 0,
    ) -> None:
        """``deadline``: seconds one attempt may take in all (None: 3 × the HTTP client's read timeout);
        ``max_answer_bytes``: longest answer :meth:`plain` reads (0: no limit)."""
        self.base_url = base_url.rstrip("/")
        self._http = http
        self._auth = auth
        self._headers = dict(headers)
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._policy = policy
        self.budget = budget
        self._stats = stats
        self._clock = clock
        #: The server's own time, from the ``Date`` of its answers (the traces' windows are bounded by it).
        self.server_time = ServerTime(clock.monotonic)
        read_timeout = http.timeout.read
        #: Seconds one attempt may take in all, reading the answer included.
        self.deadline_seconds = deadline if deadline is not None else DEADLINE_TIMEOUTS * (read_timeout or 30.0)
        self.max_answer_bytes = max_answer_bytes
        #: What bounds one attempt by :attr:`deadline_seconds` (``asyncio.timeout``; tests inject their own).
        self.deadline: Deadline = system_deadline
        hooks = http.event_hooks
        http.event_hooks = {
            "request": [*hooks["request"], _report_sending],
            "response": [*hooks["response"], _report_reading],
        }

    def _overdue(self, endpoint: Endpoint) -> LangfuseTransportError:
        return LangfuseTransportError(
            endpoint=endpoint.label,
            kind="timeout",
            detail=f"no complete answer within {self.deadline_seconds:g}s (request_deadline)",
        )

    async def plain(
        self,
        endpoint: Endpoint,
        path: str,
        *,
        params: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        encoded: bytes | None = None,
        accept: Sequence[int] = (),
        retry: bool = True,
    ) -> PlainAnswer:
        """A plain httpx call answered with JSON; 2xx and ``accept`` statuses are answers.

        ``body`` is encoded as JSON by httpx; ``encoded`` is JSON already encoded (scores, encoded once
        to size their batches), sent as it is. ``retry=False`` is for requests that are not idempotent:
        the caller decides what to do."""
        query = _query(params or {})
        headers = self._headers if encoded is None else self._json_headers

        async def attempt() -> PlainAnswer:
            await self.budget.acquire()
            started = time.perf_counter()
            try:
                async with self.deadline(self.deadline_seconds):
                    request = self._http.build_request(
                        endpoint.method, self.base_url + path, params=query, json=body, content=encoded, headers=headers
                    )
                    response = await self._http.send(request, auth=self._auth, stream=True)
                    try:
                        raw = await self._read_capped(response)
                    finally:
                        await response.aclose()
                        # httpx ties every response to its body stream in a reference cycle (the stream
                        # refers back to it), so each page, up to megabytes, waited for the cyclic garbage
                        # collector. The body is in ``raw``: the stream can let go of the response.
                        response.stream = httpx.ByteStream(b"")
            except LangfuseAnswerTooLarge as error:
                self._stats.count_request(endpoint.label, "too_large", time.perf_counter() - started)
                progress.moving()  # the server answered: asking again for less is progress too
                raise LangfuseAnswerTooLarge(endpoint=endpoint.label, limit=error.limit) from None
            except TimeoutError:
                self._stats.count_request(endpoint.label, "timeout", time.perf_counter() - started)
                raise self._overdue(endpoint) from None
            except httpx.TimeoutException as error:
                self._stats.count_request(endpoint.label, "timeout", time.perf_counter() - started)
                raise LangfuseTransportError(endpoint=endpoint.label, kind="timeout", detail=_detail(error)) from None
            except httpx.TransportError as error:
                self._stats.count_request(endpoint.label, "connection_error", time.perf_counter() - started)
                raise LangfuseTransportError(
                    endpoint=endpoint.label, kind="connection_error", detail=_detail(error)
                ) from None
            self._stats.count_request(endpoint.label, str(response.status_code), time.perf_counter() - started)
            self.server_time.observe(response.headers.get("date"))
            content = _json_or_text(raw, response.charset_encoding)
            if response.is_success or response.status_code in accept:
                if isinstance(content, str):
                    raise LangfuseResponseError(endpoint=endpoint.label, detail=f"not JSON: {_short(content)}")
                return PlainAnswer(status=response.status_code, body=content)
            raise self._error(endpoint, response.status_code, response.headers, content)

        if not retry:
            return await attempt()
        return await self._policy.run(endpoint.label, attempt)

    async def retried(self, endpoint: Endpoint, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()`` under the retry policy: for a request that is not idempotent, whose attempt checks
        whether the lost one took effect before sending again (``plain(..., retry=False)`` inside)."""
        return await self._policy.run(endpoint.label, attempt)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """The answer's bytes, or :class:`LangfuseAnswerTooLarge` as soon as they pass the limit (a
        ``Content-Length`` over it stops before reading anything)."""
        limit = self.max_answer_bytes
        declared = response.headers.get("content-length", "")
        if limit and declared.isdigit() and int(declared) > limit:
            raise LangfuseAnswerTooLarge(endpoint="", limit=limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if limit and size > limit:
                raise LangfuseAnswerTooLarge(endpoint="", limit=limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def _error(self, endpoint: Endpoint, status: int, headers: Mapping[str, str], body: Any) -> Exception:
        message = error_message(body, status)
        if 200 <= status < 300:
            return LangfuseResponseError(endpoint=endpoint.label, detail=message)
        if status in (401, 403):
            return LangfuseAuthError(endpoint=endpoint.label, status=status, message=message, base_url=self.base_url)
        if status == 404:
            return LangfuseNotFoundError(endpoint=endpoint.label, status=status, message=message)
        retry_after = parse_retry_after(_header(headers, "retry-after"), self._clock)
        return LangfuseHTTPError(endpoint=endpoint.label, status=status, message=message, retry_after=retry_after)


def error_message(body: Any, status: int) -> str:
    """The server's message from an error body (``{"message": …}``, zod ``error`` details, or text)."""
    if isinstance(body, Mapping):
        parts = [str(body[key]) for key in ("message", "error") if body.get(key)]
        if parts:
            return _short(": ".join(parts))
        return _short(json.dumps(body, default=str))
    if isinstance(body, str) and body.strip():
        return _short(body.strip())
    if body:
        return _short(json.dumps(body, default=str))
    return httpx.codes.get_reason_phrase(status) or "no message"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def _query(params: Mapping[str, QueryValue]) -> httpx.QueryParams:
    """Query pairs as the generated client encodes them: lists repeat the key, booleans lower-case."""
    pairs: list[tuple[str, str | int | float | bool | None]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        elif isinstance(value, str | int):
            pairs.append((key, str(value)))
        else:
            pairs.extend((key, item) for item in value)
    return httpx.QueryParams(pairs)


async def _report_sending(request: httpx.Request) -> None:
    progress.moving()


async def _report_reading(response: httpx.Response) -> None:
    """The answer's head arrived; each piece of its body will be reported as it arrives."""
    progress.moving()
    response.stream = _ReportingStream(response.stream)


class _ReportingStream(httpx.AsyncByteStream):
    """An answer's body stream that reports progress on each chunk (httpx has no hook per chunk)."""

    def __init__(self, inner: httpx.SyncByteStream | httpx.AsyncByteStream) -> None:
        assert isinstance(inner, httpx.AsyncByteStream)
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            progress.moving()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _json_or_text(raw: bytes, encoding: str | None) -> Any:
    """The answer as JSON, else as text (an HTML 404, a proxy's error page)."""
    try:
        return jsonbytes.loads(raw)
    except ValueError:
        pass
    try:
        return raw.decode(encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return raw.decode("utf-8", errors="replace")


def _detail(error: Exception) -> str:
    return str(error) or type(error).__name__


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

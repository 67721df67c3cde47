"""Our retry policy and per-minute request budget; the package's own retries stay off.

The schedule, ``Retry-After`` parsing and the give-up rule are the shared ones (trace_scorer.runtime.retry);
what is Langfuse's own is what is retryable, and the counting of retries in :class:`RequestStats`.

- 429: wait what ``Retry-After`` says (seconds or an HTTP date); longer than ``retry_after_max`` is
  raised instead. Without the header: the exponential back-off.
- 5xx, 408, timeouts, dropped connections: exponential back-off (``initial`` × ``multiplier``ⁿ, at most
  ``max``), at most ``max_attempts`` attempts in all.
- Any other 4xx: raised at once (retrying would not change the answer).

Every retried request is idempotent: reads, and score posts whose ids make a resend an overwrite.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import structlog

from trace_scorer.config.langfuse import LangfuseRetrySettings
from trace_scorer.langfuse.errors import LangfuseHTTPError, LangfuseTransportError
from trace_scorer.langfuse.http.clock import Clock
from trace_scorer.langfuse.http.stats import RequestStats
from trace_scorer.runtime import progress
from trace_scorer.runtime import retry as shared

T = TypeVar("T")

#: ``trace-scorer check`` answers within seconds (issue 22): one more attempt after half a second for a blip,
#: a 429 asking more than 5 s is the answer, instead of the worker's minute of back-off.
CHECK_RETRY = LangfuseRetrySettings(initial=0.5, max=0.5, max_attempts=2, retry_after_max=5.0)
#: ``check``: seconds a connection may take (a mistyped or unreachable host); reads keep ``timeout``.
CHECK_CONNECT_TIMEOUT = 3.0

log = structlog.get_logger(__name__)


def _server_trouble(status: int) -> bool:
    """408 and 5xx (but 501, which no retry will change): worth another attempt."""
    return status == 408 or (500 <= status < 600 and status != 501)


def parse_retry_after(value: str | None, clock: Clock) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date."""
    return shared.parse_retry_after(value, now=lambda: clock.now().timestamp())


def _asked_wait(error: BaseException | None) -> float | None:
    """The wait a 429 asked for (``Retry-After``); other statuses' headers are not waited on."""
    if isinstance(error, LangfuseHTTPError) and error.status == 429:
        return error.retry_after
    return None


class LangfuseRetryPolicy:
    """Runs one request with retries; counts each retry and its wait in :class:`RequestStats`."""

    def __init__(self, settings: LangfuseRetrySettings, clock: Clock, stats: RequestStats) -> None:
        self._settings = settings
        self._clock = clock
        self._stats = stats
        self._backoff = shared.backoff(settings.initial, settings.max, multiplier=settings.multiplier)

    def retryable(self, error: BaseException) -> bool:
        """Transport failures, 429 and server trouble (a 429 asking too long a wait is raised: see run)."""
        if isinstance(error, LangfuseTransportError):
            return True
        if isinstance(error, LangfuseHTTPError):
            return error.status == 429 or _server_trouble(error.status)
        return False

    async def run(self, endpoint: str, send: Callable[[], Awaitable[T]]) -> T:
        """``send()`` once, and again while its error is retryable and attempts remain."""

        def on_retry(error: BaseException | None, attempt: int, wait: float) -> None:
            self._stats.count_retry(endpoint, _outcome(error), wait)
            log.warning(
                "langfuse.retry",
                endpoint=endpoint,
                outcome=_outcome(error),
                attempt=attempt,
                wait_seconds=round(wait, 3),
                error=str(error),
            )

        retrying = shared.retrying(
            attempts=self._settings.max_attempts,
            retryable=self.retryable,
            wait=self._backoff,
            retry_after=_asked_wait,
            max_retry_after=self._settings.retry_after_max,
            sleep=self._clock.sleep,
            on_retry=on_retry,
        )
        attempts = 0

        async def attempt() -> T:
            nonlocal attempts
            attempts += 1
            try:
                return await send()
            except (LangfuseHTTPError, LangfuseTransportError) as error:
                error.attempts = attempts
                raise

        return await shared.run_retrying(retrying, attempt)


def _outcome(error: BaseException | None) -> str:
    if isinstance(error, LangfuseHTTPError):
        return str(error.status)
    if isinstance(error, LangfuseTransportError):
        return error.kind
    return "error"


class SharedBudget(Protocol):
    """A request budget kept outside the process (``trace_scorer.distributed.rates``)."""

    async def acquire(self) -> None: ...


class RequestBudget:
    """At most ``per_minute`` requests in any 60 s, so also in any fixed one-minute window.

    Langfuse Cloud counts requests in fixed windows that start with the first request. A leaky bucket
    (e.g. aiolimiter) lets up to twice its rate through inside one such window; a sliding log of the
    last minute's request times does not, hence this small hand-written limiter. 0 = unlimited.
    """

    WINDOW = 60.0

    def __init__(self, per_minute: int, clock: Clock, stats: RequestStats) -> None:
        self.per_minute = per_minute
        self._clock = clock
        self._stats = stats
        self._sent: collections.deque[float] = collections.deque()
        self._lock = asyncio.Lock()
        self._shared: SharedBudget | None = None

    def share(self, budget: SharedBudget) -> None:
        """Book requests with ``budget`` (one for every replica: Langfuse counts per organisation)."""
        self._shared = budget

    async def acquire(self) -> None:
        """Wait until one more request fits in the budget, and book it."""
        if self.per_minute <= 0:
            return
        if self._shared is not None:
            started = self._clock.monotonic()
            await self._shared.acquire()
            self._stats.budget_wait_seconds += self._clock.monotonic() - started
            return
        async with self._lock:
            while True:
                now = self._clock.monotonic()
                while self._sent and self._sent[0] <= now - self.WINDOW:
                    self._sent.popleft()
                if len(self._sent) < self.per_minute:
                    self._sent.append(now)
                    return
                wait = self._sent[0] + self.WINDOW - now
                self._stats.budget_wait_seconds += wait
                progress.pausing(wait)  # up to a minute on purpose: not a stall (liveness)
                await self._clock.sleep(wait)

"""Our retry policy (tenacity) and per-minute request budget; the package's own retries stay off.

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
import email.utils
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential

from trace_scorer.config.langfuse import RetrySettings
from trace_scorer.langfuse.clock import Clock
from trace_scorer.langfuse.errors import LangfuseHTTPError, LangfuseTransportError
from trace_scorer.langfuse.stats import RequestStats

T = TypeVar("T")

log = structlog.get_logger(__name__)


def _server_trouble(status: int) -> bool:
    """408 and 5xx (but 501, which no retry will change): worth another attempt."""
    return status == 408 or (500 <= status < 600 and status != 501)


def parse_retry_after(value: str | None, clock: Clock) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - clock.now()).total_seconds())


class RetryPolicy:
    """Runs one request with retries; counts each retry and its wait in :class:`RequestStats`."""

    def __init__(self, settings: RetrySettings, clock: Clock, stats: RequestStats) -> None:
        self._settings = settings
        self._clock = clock
        self._stats = stats
        self._backoff = wait_exponential(
            multiplier=settings.initial, exp_base=settings.multiplier, max=settings.max
        )

    def retryable(self, error: BaseException) -> bool:
        if isinstance(error, LangfuseTransportError):
            return True
        if isinstance(error, LangfuseHTTPError):
            if error.status == 429:
                return error.retry_after is None or error.retry_after <= self._settings.retry_after_max
            return _server_trouble(error.status)
        return False

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, LangfuseHTTPError) and error.status == 429 and error.retry_after is not None:
            return error.retry_after
        return float(self._backoff(state))

    async def run(self, endpoint: str, send: Callable[[], Awaitable[T]]) -> T:
        """``send()`` once, and again while its error is retryable and attempts remain."""

        def before_sleep(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            self._stats.count_retry(endpoint, _outcome(error), wait)
            log.warning(
                "langfuse.retry",
                endpoint=endpoint,
                outcome=_outcome(error),
                attempt=state.attempt_number,
                wait_seconds=round(wait, 3),
                error=str(error),
            )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._settings.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(self.retryable),
            sleep=self._clock.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                try:
                    return await send()
                except (LangfuseHTTPError, LangfuseTransportError) as error:
                    error.attempts = attempt.retry_state.attempt_number
                    raise
        raise AssertionError("unreachable: tenacity either returns or re-raises")  # pragma: no cover


def _outcome(error: BaseException | None) -> str:
    if isinstance(error, LangfuseHTTPError):
        return str(error.status)
    if isinstance(error, LangfuseTransportError):
        return error.kind
    return "error"


class RequestBudget:
    """At most ``per_minute`` requests in any 60 s, so also in any fixed one-minute window.

    Langfuse Cloud counts requests in fixed windows that start with the first request. A leaky bucket
    (e.g. aiolimiter) lets up to twice its rate through inside one such window; a sliding log of the
    last minute's request times does not, hence this small hand-written limiter. 0 = unlimited.
    """

    WINDOW = 60.0

    def __init__(self, per_minute: int, clock: Clock, stats: RequestStats) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._stats = stats
        self._sent: collections.deque[float] = collections.deque()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait until one more request fits in the budget, and book it."""
        if self._per_minute <= 0:
            return
        async with self._lock:
            while True:
                now = self._clock.monotonic()
                while self._sent and self._sent[0] <= now - self.WINDOW:
                    self._sent.popleft()
                if len(self._sent) < self._per_minute:
                    self._sent.append(now)
                    return
                wait = self._sent[0] + self.WINDOW - now
                self._stats.budget_wait_seconds += wait
                await self._clock.sleep(wait)

"""The transport retry policy (tenacity): what is retried, how long to wait, when to give up.

429 waits what ``Retry-After`` says; 5xx, 408/409, timeouts and connection errors back off exponentially
(2 s, ×2, up to 30 s by default, plus up to 1 s of jitter so concurrent requests do not retry in step).
The wait is ``wait_exponential + wait_random`` rather than ``wait_exponential_jitter``, whose parameters
changed within tenacity 9.x.
Other 4xx (bad request, auth, not found) are not retried: asking again would get the same answer.
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import openai
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from trace_scorer.config.judge import RetrySettings
from trace_scorer.judge.limits import Sleep

_TRANSIENT_STATUSES = frozenset({408, 409, 429})


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: throttling, server errors, timeouts, dropped connections."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _TRANSIENT_STATUSES or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The wait the server asked for (``retry-after-ms``, ``Retry-After`` seconds or HTTP date), if any."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _last_exception(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None and state.outcome.failed else None


class _WaitRetryAfterOr(wait_base):
    """``Retry-After`` when the response has one, else the fallback back-off."""

    def __init__(self, fallback: wait_base) -> None:
        self._fallback = fallback

    def __call__(self, retry_state: RetryCallState) -> float:
        asked = retry_after_seconds(_last_exception(retry_state))
        return asked if asked is not None else self._fallback(retry_state)


class _StopWhenRetryAfterTooLong(stop_base):
    """Give up now when the server asks for a wait longer than we are willing to hold a request."""

    def __init__(self, limit: float) -> None:
        self._limit = limit

    def __call__(self, retry_state: RetryCallState) -> bool:
        asked = retry_after_seconds(_last_exception(retry_state))
        return asked is not None and asked > self._limit


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    initial_wait: float = 2.0
    max_wait: float = 30.0
    max_retry_after: float = 300.0
    jitter: float = 1.0
    #: Injected so tests can record the waits instead of sleeping.
    sleep: Sleep = field(default=asyncio.sleep)

    @classmethod
    def from_settings(cls, settings: RetrySettings, sleep: Sleep = asyncio.sleep) -> RetryPolicy:
        """The policy configured in ``[judge]`` or ``[embeddings]``."""
        return cls(
            attempts=settings.retry_attempts,
            initial_wait=settings.retry_initial_wait,
            max_wait=settings.retry_max_wait,
            max_retry_after=settings.max_retry_after,
            sleep=sleep,
        )

    def retrying(self, on_retry_after: Callable[[float], None] | None = None) -> AsyncRetrying:
        """A fresh tenacity controller; ``on_retry_after`` hears of each server-requested wait."""

        def before_sleep(state: RetryCallState) -> None:
            asked = retry_after_seconds(_last_exception(state))
            if asked is not None and on_retry_after is not None:
                on_retry_after(asked)

        return AsyncRetrying(
            retry=retry_if_exception(is_transient),
            wait=_WaitRetryAfterOr(
                wait_exponential(multiplier=self.initial_wait, exp_base=2, max=self.max_wait)
                + wait_random(0, self.jitter)
            ),
            stop=stop_after_attempt(self.attempts) | _StopWhenRetryAfterTooLong(self.max_retry_after),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )

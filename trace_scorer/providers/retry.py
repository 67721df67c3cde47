"""The LLM providers' retry policy: what is retried, how long to wait, when to give up.

429 waits what ``Retry-After`` (or ``retry-after-ms``) says; 5xx, 408/409, timeouts and connection errors
back off exponentially (2 s, ×2, up to 30 s by default, plus up to 1 s of jitter so concurrent requests do
not retry in step); so does a request that runs out of its total deadline (``request_deadline``). Other
4xx (bad request, auth, not found) are not retried: asking again would get the same answer. The schedule,
the ``Retry-After`` parsing and the give-up rule are the shared ones (trace_scorer.runtime.retry); what is
retryable and where the wait is read from are the providers' own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import openai
from tenacity import AsyncRetrying

from trace_scorer.config.judge import ProviderRetrySettings
from trace_scorer.runtime import retry as shared
from trace_scorer.runtime.retry import Sleep

_TRANSIENT_STATUSES = frozenset({408, 409, 429})


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: throttling, server errors, timeouts, dropped connections."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _TRANSIENT_STATUSES or exc.status_code >= 500
    return False


def retry_status(exc: BaseException | None) -> str:
    """What the failed attempt got, as a telemetry label: the HTTP status, ``timeout`` (a per-read timeout
    or the request's deadline) or ``connection_error``."""
    if isinstance(exc, openai.APIStatusError):
        return str(exc.status_code)
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error"
    return "error"


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
    return shared.parse_retry_after(headers.get("retry-after"))


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
    def from_settings(cls, settings: ProviderRetrySettings, sleep: Sleep = asyncio.sleep) -> RetryPolicy:
        """The policy configured in ``[judge]`` or ``[embeddings]``."""
        return cls(
            attempts=settings.retry_attempts,
            initial_wait=settings.retry_initial_wait,
            max_wait=settings.retry_max_wait,
            max_retry_after=settings.max_retry_after,
            sleep=sleep,
        )

    def lazy(
        self,
        on_retry_after: Callable[[float], None] | None = None,
        on_retry: shared.OnRetry | None = None,
        permanent: Callable[[BaseException], bool] | None = None,
    ) -> LazyRetrying:
        """:meth:`retrying`'s controller, made only when a call's first attempt fails (``run_retrying``)."""
        return LazyRetrying(lambda: self.retrying(on_retry_after, on_retry, permanent))

    def retrying(
        self,
        on_retry_after: Callable[[float], None] | None = None,
        on_retry: shared.OnRetry | None = None,
        permanent: Callable[[BaseException], bool] | None = None,
    ) -> AsyncRetrying:
        """A fresh tenacity controller; ``on_retry_after`` hears of each server-requested wait, ``on_retry``
        of every retry (the failure, the attempt that failed, the wait before the next one); a failure
        ``permanent`` says is final is not retried even when its status is (a 500 naming a parameter the
        server does not take says the same thing every time)."""

        def before_retry(error: BaseException | None, attempt: int, wait: float) -> None:
            asked = retry_after_seconds(error)
            if asked is not None and on_retry_after is not None:
                on_retry_after(asked)
            if on_retry is not None:
                on_retry(error, attempt, wait)

        return shared.retrying(
            attempts=self.attempts,
            retryable=is_transient if permanent is None else lambda e: is_transient(e) and not permanent(e),
            wait=shared.backoff(self.initial_wait, self.max_wait, jitter=self.jitter),
            retry_after=retry_after_seconds,
            max_retry_after=self.max_retry_after,
            sleep=self.sleep,
            on_retry=before_retry,
        )


class LazyRetrying:
    """One call's tenacity controller, made when first asked for: nearly every call succeeds at once and
    needs none. Call it for the controller (``run_retrying`` does when the first attempt fails)."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], AsyncRetrying]) -> None:
        self._make = make
        self._made: AsyncRetrying | None = None

    def __call__(self) -> AsyncRetrying:
        if self._made is None:
            self._made = self._make()
        return self._made

    @property
    def attempts(self) -> int:
        """The attempts the call made: 1 unless the controller was made and counted more."""
        return 1 if self._made is None else int(self._made.statistics.get("attempt_number", 1))

"""The one retry building block (tenacity) under both Langfuse's and the LLM providers' retry policies.

What it holds: the exponential back-off schedule (optionally with jitter, so concurrent requests do not
retry in step), ``Retry-After`` parsing (seconds or an HTTP date), waiting what the server asked for
instead of the back-off, giving up at once when the server asks for a wait longer than we are willing to
hold a request, and a hook told of every retry (for counters and logs); each wait is announced as
progress (:mod:`trace_scorer.runtime.progress`), so liveness does not take a long back-off for a stall. What is
retryable, and where a wait the server asked for is read from, stays with each caller
(trace_scorer.langfuse.http.retry, trace_scorer.providers.retry).

The wait is ``wait_exponential + wait_random`` rather than ``wait_exponential_jitter``, whose parameters
changed within tenacity 9.x.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

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

from trace_scorer.runtime import progress

T = TypeVar("T")

#: An ``asyncio.sleep`` stand-in (tests inject one that records the waits).
Sleep = Callable[[float], Awaitable[None]]
#: The wait a failure asked for (a ``Retry-After``), or None when it asked for none.
RetryAfter = Callable[[BaseException | None], float | None]
#: Told of each retry before its wait: the failure, the attempt that failed (1-based), the wait.
OnRetry = Callable[[BaseException | None, int, float], None]


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date.

    ``now`` is the wall clock in seconds since the epoch (to read an HTTP date). None when the header is
    absent or unreadable; never negative.
    """
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
    return max(0.0, when.timestamp() - now())


def backoff(initial: float, maximum: float, *, multiplier: float = 2.0, jitter: float = 0.0) -> wait_base:
    """``initial`` × ``multiplier``ⁿ, at most ``maximum``, plus up to ``jitter`` seconds at random."""
    wait: wait_base = wait_exponential(multiplier=initial, exp_base=multiplier, max=maximum)
    if jitter > 0:
        wait = wait + wait_random(0, jitter)
    return wait


def last_exception(state: RetryCallState) -> BaseException | None:
    """The failure of the attempt that just ended (None when it returned)."""
    return state.outcome.exception() if state.outcome is not None and state.outcome.failed else None


class WaitRetryAfterOr(wait_base):
    """What the server asked for when the failure carries a wait, else the fallback back-off."""

    def __init__(self, retry_after: RetryAfter, fallback: wait_base) -> None:
        self._retry_after = retry_after
        self._fallback = fallback

    def __call__(self, retry_state: RetryCallState) -> float:
        asked = self._retry_after(last_exception(retry_state))
        return asked if asked is not None else float(self._fallback(retry_state))


class StopWhenRetryAfterTooLong(stop_base):
    """Give up now when the server asks for a wait longer than ``limit`` (e.g. an exhausted daily quota)."""

    def __init__(self, retry_after: RetryAfter, limit: float) -> None:
        self._retry_after = retry_after
        self._limit = limit

    def __call__(self, retry_state: RetryCallState) -> bool:
        asked = self._retry_after(last_exception(retry_state))
        return asked is not None and asked > self._limit


def retrying(
    *,
    attempts: int,
    retryable: Callable[[BaseException], bool],
    wait: wait_base,
    retry_after: RetryAfter,
    max_retry_after: float,
    sleep: Sleep,
    on_retry: OnRetry | None = None,
) -> AsyncRetrying:
    """A fresh tenacity controller: at most ``attempts`` attempts of what ``retryable`` accepts, each wait
    what ``retry_after`` reads from the failure or else ``wait``; a wait asked for longer than
    ``max_retry_after`` raises the failure at once. The last failure is re-raised as is."""

    def before_sleep(state: RetryCallState) -> None:
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        progress.pausing(pause)  # a wait on purpose, not a stall (liveness)
        if on_retry is not None:
            on_retry(last_exception(state), state.attempt_number, pause)

    return AsyncRetrying(
        retry=retry_if_exception(retryable),
        wait=WaitRetryAfterOr(retry_after, wait),
        stop=stop_after_attempt(attempts) | StopWhenRetryAfterTooLong(retry_after, max_retry_after),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )


async def run_retrying(retrying: AsyncRetrying | Callable[[], AsyncRetrying], attempt: Callable[[], Awaitable[T]]) -> T:
    """``await attempt()`` under ``retrying`` (a controller from :func:`retrying`, or what makes one when
    the first attempt fails): the result, or the last failure once the retries run out.

    tenacity keeps a call's last step actions, bound to the controller, in the controller's own state: a
    reference cycle of ~45 objects a call that only the cyclic garbage collector frees. At one controller
    per judge request that was most of the worker's garbage (143,000 objects in a 1,000-trace bench run)
    and what made the collector's full walks frequent. Resetting that state once the call is over breaks
    the cycle, so the controller is freed as soon as it is dropped.

    The first attempt runs before tenacity is entered: tenacity's per-call machinery (its action list,
    its state) cost ~0.1 ms of CPU a judge call, and nearly every call succeeds at once. A first attempt
    that fails is handed to tenacity as its attempt 1 (raised again, not sent again), so what is retried,
    the waits, the hooks, the attempt count and the error raised are the controller's, as before. Given
    what makes the controller, a call that succeeds at once makes none (~10 µs, a judge call's 2 %)."""
    try:
        return await attempt()
    except Exception as error:
        first: Exception | None = error
    if not isinstance(retrying, AsyncRetrying):
        retrying = retrying()

    async def replayed() -> T:
        nonlocal first
        if first is not None:
            error, first = first, None
            raise error
        return await attempt()

    try:
        return await retrying(replayed)
    finally:
        retrying.iter_state.reset()

"""The shared retry building block (trace_scorer.retry) under the Langfuse and the LLM providers' policies."""

from __future__ import annotations

import email.utils

import pytest
from tenacity import RetryCallState

from trace_scorer.retry import backoff, parse_retry_after, retrying


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("17", now=lambda: now) == 17.0
    assert parse_retry_after(" 0.5 ", now=lambda: now) == 0.5
    assert parse_retry_after("-3", now=lambda: now) == 0.0
    date = email.utils.formatdate(now + 42, usegmt=True)
    assert parse_retry_after(date, now=lambda: now) == 42.0
    assert parse_retry_after(email.utils.formatdate(now - 10, usegmt=True), now=lambda: now) == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("  ") is None
    assert parse_retry_after("soon") is None


def test_backoff_doubles_up_to_the_maximum() -> None:
    wait = backoff(2.0, 30.0)
    waits = []
    for attempt in range(1, 7):
        state = RetryCallState(None, None, (), {})
        state.attempt_number = attempt
        waits.append(wait(state))
    assert waits == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


class Asked(Exception):
    def __init__(self, wait: float | None) -> None:
        super().__init__(f"asked {wait}")
        self.wait = wait


async def test_waits_what_was_asked_counts_retries_and_raises_a_wait_too_long() -> None:
    slept: list[float] = []
    heard: list[tuple[int, float]] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    answers = iter([Asked(None), Asked(7.0), Asked(301.0)])
    controller = retrying(
        attempts=6,
        retryable=lambda exc: isinstance(exc, Asked),
        wait=backoff(2.0, 30.0),
        retry_after=lambda exc: exc.wait if isinstance(exc, Asked) else None,
        max_retry_after=300.0,
        sleep=sleep,
        on_retry=lambda exc, attempt, wait: heard.append((attempt, wait)),
    )
    with pytest.raises(Asked, match=r"asked 301\.0"):
        async for attempt in controller:
            with attempt:
                raise next(answers)
    assert slept == [2.0, 7.0]
    assert heard == [(1, 2.0), (2, 7.0)]

"""The shared retry building block (trace_scorer.runtime.retry) under the Langfuse and the LLM providers' policies."""

from __future__ import annotations

import email.utils
import gc
import weakref
from collections.abc import Iterator

import pytest
from tenacity import RetryCallState

from trace_scorer.runtime import progress
from trace_scorer.runtime.retry import backoff, parse_retry_after, retrying, run_retrying


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


@pytest.fixture
def no_cyclic_collector() -> Iterator[None]:
    """Only reference counting frees objects while the test runs."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _controller(heard: list[tuple[int, float]]) -> object:
    async def no_wait(seconds: float) -> None:
        return None

    return retrying(
        attempts=3,
        retryable=lambda exc: isinstance(exc, Asked),
        wait=backoff(2.0, 30.0),
        retry_after=lambda exc: None,
        max_retry_after=300.0,
        sleep=no_wait,
        on_retry=lambda exc, attempt, wait: heard.append((attempt, wait)),
    )


@pytest.mark.usefixtures("no_cyclic_collector")
async def test_a_request_that_succeeds_leaves_its_controller_to_reference_counting() -> None:
    """A controller a request: once the call has succeeded nothing keeps it alive, so it is freed at once
    (tenacity's own step state would otherwise tie it in a cycle that only the cyclic collector breaks:
    ~45 objects a judge request)."""

    async def answer() -> str:
        return "answer"

    controller = _controller([])
    assert await run_retrying(controller, answer) == "answer"  # type: ignore[arg-type]
    freed = weakref.ref(controller)
    del controller
    assert freed() is None


async def test_run_retrying_retries_what_is_retryable_and_raises_the_last_failure() -> None:
    heard: list[tuple[int, float]] = []
    answers = iter([Asked(None), "answer"])

    async def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    controller = _controller(heard)
    assert await run_retrying(controller, flaky) == "answer"  # type: ignore[arg-type]
    assert heard == [(1, 2.0)] and controller.statistics["attempt_number"] == 2  # type: ignore[attr-defined]

    async def down() -> str:
        raise Asked(None)

    controller = _controller(heard)
    with pytest.raises(Asked):
        await run_retrying(controller, down)  # type: ignore[arg-type]
    assert controller.statistics["attempt_number"] == 3  # type: ignore[attr-defined]


async def test_a_first_failure_is_handed_to_the_controller_not_sent_again() -> None:
    """The first attempt runs before tenacity: a failure it does not retry is raised after one send, and
    counts as the controller's attempt 1."""
    heard: list[tuple[int, float]] = []
    sent = 0

    async def refused() -> str:
        nonlocal sent
        sent += 1
        raise ValueError("not retryable")

    controller = _controller(heard)
    with pytest.raises(ValueError, match="not retryable"):
        await run_retrying(controller, refused)  # type: ignore[arg-type]
    assert sent == 1 and heard == [] and controller.statistics["attempt_number"] == 1  # type: ignore[attr-defined]


async def test_each_wait_is_announced_as_progress_to_the_listener_of_the_task() -> None:
    """Liveness hears of a retry's wait before it starts (a judge's or Langfuse's: both retry here), so a
    long back-off is not taken for a stall; with no listener nothing is told."""
    heard: list[float] = []
    failures = iter([Asked(150.0), Asked(None)])

    async def attempt() -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return "done"

    async def sleep(seconds: float) -> None:
        return None

    controller = retrying(attempts=3, retryable=lambda e: True, wait=backoff(1.0, 1.0),
                          retry_after=lambda e: e.wait if isinstance(e, Asked) else None,
                          max_retry_after=300.0, sleep=sleep)
    with progress.reported_to(heard.append):
        assert await run_retrying(controller, attempt) == "done"
    assert heard == [150.0, 1.0]
    failures = iter([Asked(None)])
    assert await run_retrying(controller, attempt) == "done"  # no listener: nothing to tell, no error
    assert heard == [150.0, 1.0]

"""Distributed mode's scheduling rules: a target's interval as a cron, and which failures the queue retries."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from procrastinate.jobs import Job

from trace_scorer.distributed.fleet import JobRetry, cron_every
from trace_scorer.langfuse import LangfuseAuthError, LangfuseContractError, LangfuseError
from trace_scorer.langfuse.errors import LangfuseHTTPError
from trace_scorer.worker.batch import LangfuseUnavailable


@pytest.mark.parametrize(
    ("seconds", "cron"),
    [
        (1, "* * * * * */1"),
        (5, "* * * * * */5"),
        (45, "* * * * * */30"),  # rounded down to a step a minute divides by
        (60, "* * * * *"),
        (300, "*/5 * * * *"),
        (420, "*/6 * * * *"),  # 7 minutes: every 6
        (3600, "0 * * * *"),
        (86400, "0 * * * *"),  # at most hourly: the plan then catches up by max_window
    ],
)
def test_a_target_interval_becomes_the_nearest_shorter_cron_step(seconds: float, cron: str) -> None:
    assert cron_every(seconds) == cron


def job(attempts: int) -> Job:
    return Job(id=1, queue="default", lock=None, queueing_lock=None, task_name="t", attempts=attempts)


def test_what_waiting_can_fix_is_retried_with_capped_exponential_back_off() -> None:
    retry = JobRetry(initial=2.0, maximum=300.0)
    before = datetime.now(UTC)
    decisions = [retry.get_retry_decision(exception=LangfuseUnavailable("down"), job=job(n)) for n in range(12)]
    waits = [(d.retry_at - before).total_seconds() for d in decisions if d is not None and d.retry_at is not None]
    assert len(waits) == 12  # never given up: the batch holds its window's watermark
    assert [round(w) for w in waits[:4]] == [2, 4, 8, 16]
    assert all(300 <= w < 301 for w in waits[8:])  # capped at five minutes
    assert retry.get_retry_decision(exception=LangfuseError("502 Bad Gateway"), job=job(0)) is not None


@pytest.mark.parametrize(
    "error",
    [
        LangfuseContractError(endpoint="POST /api/public/scores", server_version="4.16.0", detail="405"),
        LangfuseAuthError(endpoint="GET /api/public/projects", status=401, message="no", base_url="http://lf"),
    ],
)
def test_what_waiting_cannot_fix_is_not_retried(error: Exception) -> None:
    assert JobRetry().get_retry_decision(exception=error, job=job(0)) is None


def test_a_retry_after_longer_than_the_back_off_is_honoured() -> None:
    """The client gives up on a 429 asking longer than ``retry_after_max``: the job waits what was asked."""
    before = datetime.now(UTC)
    error = LangfuseHTTPError(endpoint="GET /api/public/v2/observations", status=429, message="", retry_after=120.0)
    decision = JobRetry(initial=2.0).get_retry_decision(exception=error, job=job(0))
    assert decision is not None and decision.retry_at is not None
    assert 120 <= (decision.retry_at - before).total_seconds() < 121

"""Issue #13: every judge request has a total deadline (retried like a timeout), each judged metric of a
sample has one too (a hanging judge fails that metric, named in the log), and every HTTP retry of a judge
call is told to ``Judge.on_retry`` (the worker's ``judge_retries_total`` and wait counters).

Deadlines are :class:`ManualDeadlines` expired once the fake server holds the request: no test waits
for time to pass."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx
import structlog

from tests.support.clocks import SleepRecorder
from tests.support.deadlines import ManualDeadlines
from tests.support.judge import JudgeFactory, booking_sample, completion, error, make_metric, provider, verdict
from trace_scorer.config import TargetSettings
from trace_scorer.config.judge import JudgeSettings, ProviderSettings
from trace_scorer.judge import Judge
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Failed, Resources, Score
from trace_scorer.ops.telemetry import Telemetry
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan


def critic(judge: Judge) -> AspectCritic:
    metric: AspectCritic = make_metric(AspectCritic, judge, "has_date", definition="The answer names a date")
    return metric


class HoldingServer:
    """A chat endpoint that holds the first ``hold`` requests without ever answering, then answers."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.served = 0
        self.holding = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.served += 1
        if self.served <= self.hold:
            self.holding.set()
            await asyncio.Event().wait()  # never answers: only a deadline gets the caller out
        return completion(verdict(1))


@pytest.fixture
def server() -> Iterator[HoldingServer]:
    holding = HoldingServer(hold=1)
    with respx.mock(assert_all_called=False) as mock:  # cancelled calls are not recorded
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=holding)
        yield holding


async def finish(task: asyncio.Task[Any]) -> Any:
    """The task's result; a task left hanging by a failed assertion is cancelled, not leaked."""
    try:
        return await task
    finally:
        task.cancel()


# --- settings -------------------------------------------------------------------------------------


def test_request_deadline_defaults_to_three_timeouts() -> None:
    assert ProviderSettings(name="p", base_url="http://x").deadline == 180.0
    assert ProviderSettings(name="p", base_url="http://x", timeout="5s").deadline == 15.0
    assert ProviderSettings(name="p", base_url="http://x", request_deadline="40s").deadline == 40.0
    assert JudgeSettings().metric_deadline == 600.0
    with pytest.raises(ValueError):
        ProviderSettings(name="p", base_url="http://x", request_deadline=0)


# --- the request deadline -------------------------------------------------------------------------


async def test_a_request_past_its_deadline_is_retried_like_a_timeout(
    server: HoldingServer, make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    judge = await make_judge(provider("p", "a", timeout="5s"))
    deadlines = ManualDeadlines()
    judge.use_deadline(deadlines)
    heard: list[tuple[str, str, float]] = []
    judge.on_retry = lambda model, status, wait: heard.append((model, status, wait))

    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(critic(judge).score(booking_sample(), {}))
        await server.holding.wait()
        assert deadlines.open == [15.0]  # the whole request, 3 × the per-read timeout
        deadlines.expire()
        outcome = await finish(task)

    assert isinstance(outcome, Score) and outcome.value == 1.0
    assert server.served == 2 and len(sleeps.waits) == 1
    assert heard == [("p/a", "timeout", sleeps.waits[0])]
    (retry,) = [e for e in logs if e["event"] == "judge.retry"]
    assert (retry["model"], retry["status"], retry["attempt"]) == ("p/a", "timeout", 1)
    assert "no complete answer within 15s" in retry["error"]


async def test_a_request_that_keeps_running_out_fails_the_model(
    make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    holding = HoldingServer(hold=99)
    judge = await make_judge(provider("p", "a", request_deadline="20s"), retry_attempts=2)
    deadlines = ManualDeadlines()
    judge.use_deadline(deadlines)
    with respx.mock(assert_all_called=False) as mock:  # cancelled calls are not recorded
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=holding)
        task = asyncio.create_task(critic(judge).score(booking_sample(), {}))
        for _ in range(2):
            await holding.holding.wait()
            holding.holding.clear()
            assert deadlines.open == [20.0]
            deadlines.expire()
        outcome = await finish(task)
    assert isinstance(outcome, Failed)
    assert "no complete answer within 20s (request_deadline) (after 2 attempts)" in outcome.reason


# --- the metric deadline --------------------------------------------------------------------------


async def test_a_hanging_judge_fails_only_its_metric_and_is_named_in_the_log(
    server: HoldingServer, make_judge: JudgeFactory
) -> None:
    """The deterministic metric of the sample keeps its score; the judged one is Failed with the reason."""
    server.hold = 99
    judge = await make_judge(provider("p", "a"), metric_deadline="2m")
    deadlines = ManualDeadlines()
    judge.deadline = deadlines  # the metric deadline only: the request's own stays the real one
    target = TargetSettings.model_validate(
        {
            "name": "t",
            "metrics": [
                {"metric": "tool_call_accuracy"},
                {"metric": "aspect_critic", "name": "has_date", "definition": "The answer names a date"},
            ],
        }
    )
    pipeline = Pipeline(build_plan(target, resources=Resources(judge=judge)))
    calls = booking_sample().messages[1].tool_calls
    sample = booking_sample(tool_calls=calls, reference_tool_calls=calls)

    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(pipeline.score_sample(sample))
        await server.holding.wait()
        assert deadlines.open == [120.0]
        deadlines.expire()
        result = await finish(task)

    assert isinstance(result.outcomes["tool_call_accuracy"], Score)
    failed = result.outcomes["has_date"]
    assert isinstance(failed, Failed)
    assert failed.reason == "judge did not answer within 120s (waiting on p/a)"
    (event,) = [e for e in logs if e["event"] == "judge_timeout"]
    assert (event["metric"], event["models"], event["deadline_seconds"]) == ("has_date", ["p/a"], 120.0)


# --- retries reach the telemetry ------------------------------------------------------------------


async def test_a_retried_judge_call_is_counted_with_its_wait(
    make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    """What the worker wires (worker/service.py): ``judge.on_retry`` → ``Telemetry.judge_retry``."""
    replies = iter([error(429, "slow down", {"retry-after": "7"}), error(503, "busy"), completion(verdict(1))])
    telemetry = Telemetry(process_metrics=False)
    judge = await make_judge(provider("p", "a"))
    judge.on_retry = telemetry.judge_retry
    with respx.mock() as mock:
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=lambda request: next(replies))
        outcome = await critic(judge).score(booking_sample(), {})
    assert isinstance(outcome, Score)

    value = telemetry.registry.get_sample_value
    assert value("trace_scorer_judge_retries_total", {"model": "p/a", "status": "429"}) == 1.0
    assert value("trace_scorer_judge_retries_total", {"model": "p/a", "status": "503"}) == 1.0
    assert value("trace_scorer_wait_seconds_total", {"service": "judge", "reason": "rate_limit"}) == 7.0
    assert value("trace_scorer_wait_seconds_total", {"service": "judge", "reason": "backoff"}) == sleeps.waits[1]


# --- an identical request in flight ------------------------------------------------------------------


async def test_a_waiter_on_an_abandoned_identical_request_fails_its_model_not_its_task(
    server: HoldingServer, make_judge: JudgeFactory
) -> None:
    """The metric that made the call is cancelled (its deadline ran out); the one that waited on the same
    request is not: its model failed, with nothing spent (``Judge.ask``, the cache's steps inline)."""
    judge = await make_judge(provider("p", "a"))
    metric = critic(judge)
    owner = asyncio.create_task(metric.run(booking_sample(id="a"), {}))
    await server.holding.wait()
    waiter = asyncio.create_task(metric.run(booking_sample(id="b"), {}))
    for _ in range(5):
        await asyncio.sleep(0)
    assert judge.cache_stats["hits"] == 1  # waiting on the owner's call
    owner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await owner
    outcome = await finish(waiter)
    assert isinstance(outcome, Failed)
    assert outcome.reason == "the judge model failed — p/a: an identical request in flight was abandoned"
    assert outcome.details["failed_models"]["p/a"]["calls"] == 0
    assert server.served == 1

"""Issue #13 through the worker: a judge that never answers does not hold the batch's other scores back,
and the judge's retries reach ``/metrics``. The judge endpoint is an in-process ``httpx.MockTransport``
(the in-process Langfuse's respx router serves only Langfuse); deadlines are expired on events, never on time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta

import httpx
import structlog

from tests.integration.worker.conftest import ChatServer
from tests.support.clocks import FakeClock, SleepRecorder
from tests.support.deadlines import ManualDeadlines
from tests.support.judge import completion, error, verdict
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, traces_target
from trace_scorer.judge import Judge
from trace_scorer.worker.service import Context

TARGET = traces_target(
    metrics=[{"metric": "tool_call_accuracy"}, {"metric": "rouge"}, {"metric": "agent_goal_accuracy"}],
)
PROVIDER = {"name": "p", "base_url": "https://llm.test/v1", "chat_models": ["a"]}


def answer(request: httpx.Request) -> httpx.Response:
    """agent_goal_accuracy's two questions: the goal and end state (no reference goal), then the verdict."""
    schema = json.loads(request.content)["response_format"]["json_schema"]["name"]
    if schema == "GoalInference":
        return completion(json.dumps({"user_goal": "know the weather", "end_state": "told the weather"}))
    return completion(verdict(1))


def judge_of(context: Context) -> Judge:
    judge = next(m.resources.judge for m in context.plans["agent"].sample_metrics if "judge" in m.needs)
    assert isinstance(judge, Judge)
    return judge


async def test_a_judge_that_never_answers_fails_only_its_metric_and_the_batch_is_posted(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, chat_server: Callable[[ChatServer], None]
) -> None:
    holding = asyncio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        holding.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    chat_server(never_answers)
    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=30)))
    h = await harness(TARGET, providers=[PROVIDER], judge={"tracing": False})
    context = await h.open()
    deadlines = ManualDeadlines()
    judge_of(context).deadline = deadlines  # the metric deadline; each request keeps its real one

    with structlog.testing.capture_logs() as logs:
        tick = asyncio.create_task(h.tick(context))
        try:
            await holding.wait()
            assert deadlines.open == [600.0]  # [judge] metric_deadline, default 10 min
            deadlines.expire()
            report = await tick
        finally:
            tick.cancel()

    # the deterministic scores (and the KPI over them) are posted; the judged one is not
    posted = {s["name"]: s["value"] for s in v4.scores.values() if s.get("traceId") == "t1"}
    assert set(posted) == {"tool_call_accuracy", "rouge", "quality"}
    assert posted["tool_call_accuracy"] == 1.0
    # the trace failed on the judged metric: the worker's retry path scores it later
    assert (report.scored, report.failed) == (0, 1)
    failure = context.state.failure("agent", "t1")
    assert failure is not None
    assert "agent_goal_accuracy: judge did not answer within 600s (waiting on p/a)" in failure.last_error
    (timeout,) = [e for e in logs if e["event"] == "judge_timeout"]
    assert (timeout["metric"], timeout["models"], timeout["trace_id"]) == ("agent_goal_accuracy", ["p/a"], "t1")


async def test_judge_retries_and_their_waits_reach_the_metrics(
    harness: MakeHarness,
    v4: InProcessLangfuse,
    clock: FakeClock,
    sleeps: SleepRecorder,
    chat_server: Callable[[ChatServer], None],
) -> None:
    replies = iter([error(429, "slow down", {"retry-after": "7"}), error(503, "busy")])

    def flaky(request: httpx.Request) -> httpx.Response:
        return next(replies, None) or answer(request)

    chat_server(flaky)
    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=30)))
    h = await harness(TARGET, providers=[PROVIDER], judge={"tracing": False})
    context = await h.open()
    report = await h.tick(context)
    assert report.scored == 1

    value = context.ops.telemetry.registry.get_sample_value
    assert value("trace_scorer_judge_retries_total", {"model": "p/a", "status": "429"}) == 1.0
    assert value("trace_scorer_judge_retries_total", {"model": "p/a", "status": "503"}) == 1.0
    assert value("trace_scorer_wait_seconds_total", {"service": "judge", "reason": "rate_limit"}) == 7.0
    assert value("trace_scorer_wait_seconds_total", {"service": "judge", "reason": "backoff"}) == sleeps.waits[1]

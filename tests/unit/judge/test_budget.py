"""``[judge] max_cost_usd`` and ``max_cost_usd_per_day``: once spent, judged metrics fail with that reason
and no further request is made; a new UTC day starts the daily budget again."""

from __future__ import annotations

from datetime import date

from tests.support.judge import JudgeFactory, ScriptedLLM, booking_sample, make_metric, provider, verdict
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Failed, Score

#: 100 prompt + 20 completion tokens a call (tests/support/judge.completion) at $1/$2 per 1M: $0.00014.
PRICED = {"prices": {"a": {"input": 1.0, "output": 2.0}}}


def critic(judge: object) -> AspectCritic:
    metric: AspectCritic = make_metric(AspectCritic, judge, "crit", definition="The answer is polite")
    return metric


async def test_a_spent_run_budget_stops_judged_metrics_with_the_reason(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("a", verdict(1))
    judge = await make_judge(provider("p", "a", **PRICED), max_cost_usd=0.0002, cache_size=0)
    first = await critic(judge).score(booking_sample(id="1"), {})
    second = await critic(judge).score(booking_sample(id="2"), {})
    third = await critic(judge).score(booking_sample(id="3"), {})
    assert isinstance(first, Score) and isinstance(second, Score)  # $0.00014, then $0.00028 ≥ $0.0002
    assert isinstance(third, Failed) and "judge budget of $0.0002 for this run is spent" in third.reason
    assert len(llm.requests) == 2  # nothing sent once it is spent


async def test_the_daily_budget_starts_again_on_a_new_utc_day(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", verdict(1))
    judge = await make_judge(provider("p", "a", **PRICED), max_cost_usd_per_day=0.0001, cache_size=0)
    day = date(2026, 11, 26)
    judge.today = lambda: day
    assert isinstance(await critic(judge).score(booking_sample(id="1"), {}), Score)
    spent = await critic(judge).score(booking_sample(id="2"), {})
    assert isinstance(spent, Failed) and "for today (UTC)" in spent.reason
    day = date(2026, 11, 27)
    assert isinstance(await critic(judge).score(booking_sample(id="3"), {}), Score)
    assert len(llm.requests) == 2

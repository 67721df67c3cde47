"""trace-scorer's evaluators inside the real Langfuse SDK's ``run_experiment``, against the Langfuse
stand-in on loopback: item-level Evaluations on each item's trace, run-level ones (means, pass@k, a KPI)
on the run, all posted by the SDK itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.standins import StartLangfuse, StartOpenAI, small_scenario
from trace_scorer.api.evaluators import EvaluationFailed, langfuse_evaluator, langfuse_run_evaluator
from trace_scorer.api.scoring import JudgeConfig
from trace_scorer.config.common import ConfigError

CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
WRONG = {"name": "get_weather", "arguments": {"city": "Rome"}}

#: Two questions, each attempted twice: "paris" right both times, "rome" right once.
DATA = [
    {
        "input": "Weather in Paris?",
        "expected_output": {"reference_tool_calls": [CALL]},
        "metadata": {"item_id": "paris"},
    },
    {
        "input": "Weather in Paris?",
        "expected_output": {"reference_tool_calls": [CALL]},
        "metadata": {"item_id": "paris"},
    },
    {
        "input": "Weather in Rome?",
        "expected_output": {"reference_tool_calls": [WRONG]},
        "metadata": {"item_id": "rome"},
    },
    {
        "input": "Weather in Rome?",
        "expected_output": {"reference_tool_calls": [WRONG]},
        "metadata": {"item_id": "rome"},
    },
]


def agent(*, item: Any, **_: Any) -> dict[str, Any]:
    """A toy agent: always asks for Paris's weather, so the Rome items fail."""
    return {"tool_calls": [CALL], "response": "It is sunny."}


def run(lf: Any, **kwargs: Any) -> Any:
    from langfuse import Langfuse

    client = Langfuse(public_key=lf.public_key, secret_key=lf.secret_key, base_url=lf.url)
    try:
        result = client.run_experiment(name="weather", data=DATA, task=agent, max_concurrency=2, **kwargs)
        client.flush()
    finally:
        client.shutdown()
    return result


def test_item_and_run_evaluators_score_through_run_experiment(start_lf: StartLangfuse) -> None:
    # SDK 5 posts score lists (a server >= 4.59); its own key: the package keeps one client per key.
    lf = start_lf(scenario=small_scenario(traces=0, datasets=()), version="4.60.0", public_key="pk-lf-api")
    item = langfuse_evaluator("tool_call_accuracy")
    per_run = langfuse_run_evaluator(
        "tool_call_accuracy",
        {"metric": "pass_at_k", "k": [1, 2], "correct_when": "tool_call_accuracy", "threshold": 1.0},
        kpis=[{"name": "reliable", "formula": "expression", "expression": "pass_at_2 * tool_call_accuracy"}],
    )

    result = run(lf, evaluators=[item], run_evaluators=[per_run])

    values = sorted(e.value for r in result.item_results for e in r.evaluations if e.name == "tool_call_accuracy")
    assert values == [0.0, 0.0, 1.0, 1.0]
    run_values = {e.name: e.value for e in result.run_evaluations}
    assert run_values["tool_call_accuracy"] == pytest.approx(0.5)
    assert run_values["pass_at_1"] == pytest.approx(0.5)  # paris: 2 of 2, rome: 0 of 2
    assert run_values["pass_at_2"] == pytest.approx(0.5)
    assert run_values["reliable"] == pytest.approx(0.25)
    # What the SDK posted: one score per item's trace, and the run's scores on the run.
    stored = lf.scores(name="tool_call_accuracy")
    trace_ids = {r.trace_id for r in result.item_results}
    on_traces = [s for s in stored if s.get("traceId") in trace_ids]
    assert sorted(s["value"] for s in on_traces) == [0.0, 0.0, 1.0, 1.0]
    on_run = [s for s in stored if s.get("datasetRunId") == result.experiment_id]
    assert [s["value"] for s in on_run] == [pytest.approx(0.5)]
    assert [s["value"] for s in lf.scores(name="pass_at_2")] == [pytest.approx(0.5)]


def test_a_metric_lacking_inputs_records_nothing(start_lf: StartLangfuse) -> None:
    lf = start_lf(scenario=small_scenario(traces=0, datasets=()), version="4.60.0", public_key="pk-lf-api2")
    # topic_adherence needs reference_topics, which no item has: skipped, so no Evaluation and no score.
    result = run(lf, evaluators=[langfuse_evaluator("tool_call_accuracy", "bleu")])
    names = {e.name for r in result.item_results for e in r.evaluations}
    assert names == {"tool_call_accuracy"}
    assert lf.scores(name="bleu") == []


def test_a_judged_metric_through_run_experiment_with_a_judge_configured_in_code(
    start_lf: StartLangfuse, start_llm: StartOpenAI
) -> None:
    lf = start_lf(scenario=small_scenario(traces=0, datasets=()), version="4.60.0", public_key="pk-lf-api3")
    llm = start_llm()
    judge = JudgeConfig(base_url=f"{llm.url}/v1", models=["judge-a"], api_key="sk-test")
    result = run(lf, evaluators=[langfuse_evaluator("agent_goal_accuracy", judge=judge)])
    values = [e.value for r in result.item_results for e in r.evaluations if e.name == "agent_goal_accuracy"]
    assert len(values) == 4 and all(0.0 <= v <= 1.0 for v in values)
    assert len(lf.scores(name="agent_goal_accuracy")) == 4


def test_an_unknown_metric_fails_where_the_evaluator_is_made() -> None:
    with pytest.raises(ConfigError, match=r"tool_call_acuracy.*did you mean 'tool_call_accuracy'"):
        langfuse_evaluator("tool_call_acuracy")


async def test_every_score_failing_raises_so_the_sdk_counts_the_evaluator_failed() -> None:
    from trace_scorer.api.evaluators import _evaluations
    from trace_scorer.data.outcomes import Failed

    with pytest.raises(EvaluationFailed, match="judge down"):
        _evaluations({"m": Failed("judge down")}, ["m"])

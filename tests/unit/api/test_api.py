"""The Python API: scoring from plain Python, sync and async, in a notebook's running loop, inputs of
every shape, clear errors before anything is scored."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trace_scorer
from trace_scorer.api.scoring import JudgeConfig, ascore, score, to_samples
from trace_scorer.config.common import ConfigError
from trace_scorer.data.outcomes import Skipped
from trace_scorer.sample import Sample

ROOT = Path(__file__).resolve().parents[3]
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
RECORD: dict[str, Any] = {
    "id": "r1",
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tool_calls": [CALL],
    "reference_tool_calls": [CALL],
}


def records(name: str) -> list[dict[str, Any]]:
    lines = (ROOT / name).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_score_runs_inside_a_running_event_loop() -> None:
    """Jupyter runs the cell in a running loop, where asyncio.run refuses to start."""

    async def cell() -> dict[str, float]:
        return score([RECORD], ["tool_call_accuracy"]).values()[0]

    assert asyncio.run(cell()) == {"tool_call_accuracy": 1.0}


async def test_ascore_is_awaited_in_the_callers_loop() -> None:
    results = await ascore([RECORD], ["tool_call_accuracy", "tool_correctness"])
    assert results.values() == [{"tool_call_accuracy": 1.0, "tool_correctness": 1.0}]


def test_samples_records_and_observation_rows_are_all_scored() -> None:
    rows = records("examples/traces/openai_chat.jsonl")
    sample = Sample.model_validate({**RECORD, "id": "s1"})
    results = score([sample, RECORD, *rows], ["tool_call_accuracy"])
    ids = [r.sample.id for r in results.samples]
    assert ids[:2] == ["s1", "r1"]
    expected_traces = {row["traceId"] for row in rows}
    assert {r.sample.trace_id for r in results.samples[2:]} == expected_traces
    assert results.values()[:2] == [{"tool_call_accuracy": 1.0}, {"tool_call_accuracy": 1.0}]


def test_the_example_samples_score_as_the_cli_does() -> None:
    results = score(records("examples/samples/agents.jsonl"), ["tool_call_accuracy"], group_by="*")
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "score", "examples/samples", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    cli = {}
    for line in done.stdout.splitlines():
        row = json.loads(line)
        if "id" in row and "tool_call_accuracy" in row.get("scores", {}):
            cli[row["id"]] = row["scores"]["tool_call_accuracy"]
    ours = {r.sample.id: r.values(kpis=False).get("tool_call_accuracy") for r in results.samples}
    assert cli and {k: v for k, v in ours.items() if k in cli} == pytest.approx(cli, abs=1e-6)


def test_kpis_and_groups() -> None:
    wrong = {**RECORD, "id": "r2", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}]}
    results = score(
        [RECORD, wrong],
        ["tool_call_accuracy"],
        kpis=[{"name": "doubled", "formula": "expression", "expression": "tool_call_accuracy * 2 / 2"}],
        group_by="*",
    )
    assert [v["doubled"] for v in results.values()] == [1.0, 0.0]
    assert results.group_values() == {"all": {"tool_call_accuracy": 0.5, "doubled": 0.5}}


def test_a_metric_lacking_inputs_is_skipped_with_the_reason() -> None:
    outcome = score([{"id": "x", "response": "hi"}], ["tool_call_accuracy"]).samples[0].outcomes
    assert outcome == {"tool_call_accuracy": Skipped("tool_calls, reference_tool_calls absent")}


def test_a_judged_metric_without_a_judge_is_skipped_with_the_reason() -> None:
    sample = {"id": "x", "messages": [{"role": "user", "content": "hi"}], "response": "hello"}
    outcome = score([sample], ["agent_goal_accuracy"]).samples[0].outcomes["agent_goal_accuracy"]
    assert isinstance(outcome, Skipped) and "judge" in outcome.reason


def test_bad_inputs_are_named_before_anything_is_scored() -> None:
    with pytest.raises(ValueError, match=r"inputs\[1\]: tool_calls\.0\.name: Field required") as raised:
        to_samples([RECORD, {"id": "bad", "tool_calls": [{"arguments": {}}]}, 42])
    assert "inputs[2]: expected a Sample or a mapping, got int" in str(raised.value)


def test_an_unknown_metric_or_option_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="did you mean 'tool_call_accuracy'"):
        score([RECORD], ["tool_call_acuracy"])
    with pytest.raises(ConfigError, match=r"metrics\[0\]\.no_such_option"):
        score([RECORD], [{"metric": "tool_call_accuracy", "no_such_option": 1}])


def test_a_judge_config_with_a_wrong_key_names_it() -> None:
    judge = JudgeConfig(base_url="http://127.0.0.1:9/v1", models=["m"], judge={"temprature": 0.5})
    with pytest.raises(ConfigError, match="JudgeConfig: temprature: Extra inputs are not permitted"):
        score([RECORD], ["agent_goal_accuracy"], judge=judge)
    with pytest.raises(ConfigError, match="base_url"):
        score([RECORD], ["agent_goal_accuracy"], judge=JudgeConfig(base_url="localhost", models=["m"]))


def test_the_api_key_is_never_shown() -> None:
    judge = JudgeConfig(base_url="http://127.0.0.1:9/v1", models=["m"], api_key="sk-secret-value")
    assert "sk-secret-value" not in repr(judge)
    assert "sk-secret-value" not in judge.settings().model_dump_json()


def test_import_trace_scorer_stays_cheap_and_reexports_the_api() -> None:
    code = (
        "import sys, trace_scorer; assert 'trace_scorer.api.scoring' not in sys.modules, 'api imported'; "
        "assert 'trace_scorer.scoring.pipeline' not in sys.modules; "
        "from trace_scorer import score, langfuse_evaluator; print(score.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "trace_scorer.api.scoring"
    assert trace_scorer.JudgeConfig is JudgeConfig

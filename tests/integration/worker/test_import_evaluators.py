"""``trace-scorer langfuse import-evaluators`` against the in-process Langfuse (4.16.0): every rule shape the
API documents — legacy trace and dataset rules (trace, dataset item and named-observation mappings), v4
observation and experiment rules — written as targets or listed with the reason; the file loads and
``check`` accepts it; an existing file is kept without ``--force``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.langfuse_inprocess import MakeLangfuse
from trace_scorer import cli
from trace_scorer.config import load_settings
from trace_scorer.scoring.plan import build_plans

pytestmark = pytest.mark.usefixtures("cli_workdir")

HELPFUL = {"id": "e1", "name": "Helpfulness", "type": "llm_as_judge"}
TOXIC = {"id": "e2", "name": "Toxicity", "type": "llm_as_judge"}
TONE = {
    "name": "Tone",
    "prompt": "Tone of {{answer}} to {{question}}",
    "outputDefinition": {
        "dataType": "CATEGORICAL",
        "score": {"description": "t", "categories": ["warm", "cold"], "shouldAllowMultipleMatches": False},
        "reasoning": {"description": "r"},
    },
    "mapping": [
        {"variable": "answer", "source": "output", "jsonPath": "$.content"},
        {"variable": "question", "source": "input", "jsonPath": None},
    ],
}
GROUNDED = {
    "name": "Grounded",
    "prompt": "Is {{generation}} for {{query}} grounded in {{ground_truth}} on {{topic}}?",
    "outputDefinition": {"dataType": "BOOLEAN", "score": {"description": "s"}, "reasoning": {"description": "r"}},
}


def legacy(
    variable: str, obj: str, source: str, json_path: str | None = None, name: str | None = None
) -> dict[str, Any]:
    return {"variable": variable, "langfuseObject": obj, "objectName": name, "source": source, "jsonPath": json_path}


RULES: tuple[dict[str, Any], ...] = (
    {
        "name": "prod helpfulness",
        "target": "trace",
        "sampling": 0.25,
        "delay": 30_000,
        "timeScope": ["NEW", "EXISTING"],
        "filter": [
            {"type": "stringOptions", "column": "Environment", "operator": "any of", "value": ["production"]},
            {"type": "string", "column": "Name", "operator": "=", "value": "weather-agent"},
            {"type": "arrayOptions", "column": "Tags", "operator": "all of", "value": ["beta"]},
            {"type": "string", "column": "User ID", "operator": "=", "value": "u-1"},
            {"type": "stringObject", "column": "Metadata", "key": "tier", "operator": "=", "value": "gold"},
        ],
        "evaluators": [
            {
                "evaluator": HELPFUL,
                "mapping": [
                    legacy("query", "trace", "input", "$.messages[0].content"),
                    legacy("generation", "generation", "output", None, "OpenAI-generation"),
                ],
            }
        ],
    },
    {
        "name": "tone (slow)",
        "target": "trace",
        "delay": 600_000,
        "timeScope": ["NEW"],
        "status": "paused",
        "evaluators": [{"evaluator": {"id": "e3", "name": "Tone", "type": "llm_as_judge"}, "mapping": None}],
    },
    {
        "name": "toxicity on items",
        "target": "dataset",
        "delay": 0,
        "timeScope": ["NEW"],
        "filter": [{"type": "stringOptions", "column": "Dataset", "operator": "any of", "value": ["ds-123"]}],
        "evaluators": [{"evaluator": TOXIC, "mapping": [legacy("query", "dataset_item", "input")]}],
    },
    {
        "name": "llm calls",
        "target": "observation",
        "sampling": 1,
        "filter": [
            {"type": "stringOptions", "column": "type", "operator": "any of", "value": ["GENERATION"]},
            {"type": "stringOptions", "column": "name", "operator": "any of", "value": ["llm-call"]},
        ],
        "evaluators": [
            {
                "evaluator": TOXIC,
                "mapping": [
                    {"variable": "query", "source": "input", "jsonPath": "$.messages[-1].content"},
                    {"variable": "generation", "source": "output", "jsonPath": None},
                ],
            }
        ],
    },
    {
        "name": "experiment correctness",
        "target": "experiment",
        "filter": [],
        "evaluators": [
            {
                "evaluator": {"id": "e4", "name": "Grounded", "type": "llm_as_judge"},
                "mapping": [
                    {"variable": "query", "source": "input", "jsonPath": None},
                    {"variable": "generation", "source": "output", "jsonPath": None},
                    {"variable": "ground_truth", "source": "expected_output", "jsonPath": "$.answer"},
                    {"variable": "topic", "source": "experiment_item_metadata", "jsonPath": "$.topic"},
                ],
            }
        ],
    },
    {
        "name": "gone dataset",
        "target": "dataset",
        "delay": 0,
        "timeScope": ["NEW"],
        "filter": [{"type": "stringOptions", "column": "Dataset", "operator": "any of", "value": ["ds-gone"]}],
        "evaluators": [{"evaluator": TOXIC, "mapping": [legacy("query", "dataset_item", "input")]}],
    },
    {
        "name": "slow traces",
        "target": "trace",
        "delay": 0,
        "timeScope": ["NEW"],
        "filter": [{"type": "number", "column": "Latency (s)", "operator": ">", "value": 10}],
        "evaluators": [{"evaluator": HELPFUL, "mapping": [legacy("query", "trace", "input")]}],
    },
    {
        "name": "every tool name",
        "target": "trace",
        "delay": 0,
        "timeScope": ["NEW"],
        "evaluators": [{"evaluator": HELPFUL, "mapping": [legacy("query", "trace", "output", "$.calls[*].name")]}],
    },
)


def run_import(*extra: str) -> int:
    return cli.main(
        ["langfuse", "import-evaluators", "--config", "settings.toml", "--output", "evaluators.toml", *extra]
    )


def test_every_rule_shape_is_imported_or_listed_with_the_reason(
    make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    langfuse = make_langfuse("4.16.0", evaluators=(TONE, GROUNDED), evaluation_rules=RULES)
    langfuse.add_dataset("ds-123", "support-bench")
    langfuse.add_dataset("ds-9", "agent-bench")
    assert run_import() == 0
    err = capsys.readouterr().err
    text = (cli_workdir / "evaluators.toml").read_text()
    written = tomllib.loads(text)
    targets = {t["name"]: t for t in written["targets"]}
    assert set(targets) == {
        "prod-helpfulness",
        "tone-slow",
        "toxicity-on-items",
        "llm-calls",
        "experiment-correctness",
    }

    prod = targets["prod-helpfulness"]
    assert prod["filter"] == {
        "environments": ["production"],
        "trace_name": "weather-agent",
        "tags": ["beta"],
        "user_id": "u-1",
        "metadata": {"tier": "gold"},
    }
    assert prod["sample_rate"] == 0.25 and "lag" not in prod  # 30 s: the default 120 s stays
    assert prod["metrics"] == [
        {
            "metric": "llm_judge",
            "name": "Helpfulness",
            "evaluator": "langfuse:Helpfulness",
            "variables": {
                "query": "$.trace.input.messages[0].content",
                "generation": '$.observations.by_name["OpenAI-generation"].output',
            },
        }
    ]
    assert "run `trace-scorer backfill --target prod-helpfulness --from DATE`" in text and "delay 30 s" in text

    tone = targets["tone-slow"]  # no mapping on the rule: the evaluator's default mapping
    assert tone["lag"] == "600s"
    assert tone["metrics"][0]["variables"] == {"answer": "$.trace.output.content", "question": "$.trace.input"}
    assert "the rule is paused in Langfuse" in text

    calls = targets["llm-calls"]
    assert calls["scope"] == "observation"
    assert calls["observations"] == {"types": ["GENERATION"], "name_pattern": "^(llm\\-call)$"}
    assert calls["metrics"][0]["variables"] == {
        "query": "$.observation.input.messages[-1].content",
        "generation": "$.observation.output",
    }

    items = targets["toxicity-on-items"]  # dataset ids → the names a target lists
    assert (items["source"], items["datasets"]) == ("dataset_runs", ["support-bench"])
    assert items["metrics"][0]["variables"] == {"query": "$.input"}
    experiment = targets["experiment-correctness"]  # no filter: every dataset of the project
    assert (experiment["source"], experiment["datasets"]) == ("dataset_runs", ["agent-bench", "support-bench"])
    assert experiment["metrics"][0]["variables"] == {
        "query": "$.trace.input",
        "generation": "$.trace.output",
        "ground_truth": "$.expectedOutput.answer",
        "topic": ["$.experimentItemMetadata.topic", "$.metadata.topic"],
    }

    for name, why in (
        ("gone dataset", "dataset id(s) ds-gone not found"),
        ("slow traces", "has no equivalent in [targets.filter]"),
        ("every tool name", "'$.calls[*].name'"),
    ):
        assert f"not translated: {name}: " in err and why in err.split(f"not translated: {name}: ")[1].splitlines()[0]
        assert f"#   - {name}: " in text

    settings = load_settings(cli_workdir / "evaluators.toml")
    assert len(build_plans(settings.targets)) == 5
    assert cli.main(["check", "--config", "evaluators.toml"]) == 0, capsys.readouterr().err


def test_an_existing_file_is_kept_without_force(
    make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    langfuse = make_langfuse("4.16.0", evaluation_rules=RULES[:1])
    (cli_workdir / "evaluators.toml").write_text("# mine\n")
    assert run_import() == 2
    assert "evaluators.toml exists: not overwritten (--force replaces it)" in capsys.readouterr().err
    assert (cli_workdir / "evaluators.toml").read_text() == "# mine\n"
    assert not langfuse.calls  # refused before any request
    assert run_import("--force") == 0
    assert "prod-helpfulness" in (cli_workdir / "evaluators.toml").read_text()


def test_a_server_without_the_rules_api_is_a_clear_error(
    make_langfuse: MakeLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_langfuse("3.120.0")
    assert run_import() == 2
    err = capsys.readouterr().err
    assert "langfuse import-evaluators: Langfuse 3.120.0 has no /api/public/unstable/evaluation-rules" in err
    assert not (cli_workdir / "evaluators.toml").exists()

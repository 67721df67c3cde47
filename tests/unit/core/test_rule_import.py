"""Evaluation rules → targets (langfuse/server/rule_import.py): each mapping object and source the API documents,
the filters, and what is refused with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse.server.rule_import import (
    Untranslatable,
    legacy_path,
    observation_filter,
    trace_filter,
    translate_rules,
    v4_path,
)


def legacy(obj: str, source: str, json_path: str | None = None, name: str | None = None) -> dict[str, Any]:
    return {"variable": "v", "langfuseObject": obj, "objectName": name, "source": source, "jsonPath": json_path}


@pytest.mark.parametrize(
    ("mapping", "path"),
    [
        (legacy("trace", "input"), "$.trace.input"),
        (legacy("trace", "output", "$.answer"), "$.trace.output.answer"),
        (legacy("trace", "metadata", "$['user.tier']"), "$.trace.metadata['user.tier']"),
        (legacy("dataset_item", "input"), "$.input"),
        (legacy("dataset_item", "expected_output", "$.goal"), "$.expectedOutput.goal"),
        (legacy("dataset_item", "metadata"), "$.metadata"),
        (legacy("generation", "output", None, "llm"), '$.observations.by_name["llm"].output'),
        (legacy("span", "input", "$[0]", "retrieve docs"), '$.observations.by_name["retrieve docs"].input[0]'),
        (legacy("retriever", "output"), "$.observations.by_type.RETRIEVER.output"),
        *[
            (legacy(kind, "metadata", None, "x"), '$.observations.by_name["x"].metadata')
            for kind in ("event", "agent", "tool", "chain", "evaluator", "embedding", "guardrail")
        ],
    ],
)
def test_legacy_mappings(mapping: dict[str, Any], path: str) -> None:
    assert legacy_path(mapping) == path


@pytest.mark.parametrize(
    ("mapping", "target", "path"),
    [
        ({"variable": "v", "source": "input", "jsonPath": None}, "observation", "$.observation.input"),
        ({"variable": "v", "source": "output", "jsonPath": "$.text"}, "observation", "$.observation.output.text"),
        ({"variable": "v", "source": "metadata", "jsonPath": "$.a.b"}, "observation", "$.observation.metadata.a.b"),
        (
            {"variable": "v", "source": "tool_calls", "jsonPath": "$[0].name"},
            "observation",
            "$.sample.tool_calls[0].name",
        ),
        ({"variable": "v", "source": "expected_output", "jsonPath": None}, "experiment", "$.expectedOutput"),
        ({"variable": "v", "source": "experiment_item_metadata", "jsonPath": "$.k"}, "experiment", "$.metadata.k"),
        ({"variable": "v", "source": "output", "jsonPath": None}, "experiment", "$.trace.output"),
    ],
)
def test_v4_mappings(mapping: dict[str, Any], target: str, path: str) -> None:
    assert v4_path(mapping, target) == path


@pytest.mark.parametrize(
    ("mapping", "why"),
    [
        (legacy("trace", "output", "$.calls[*].name"), "wildcards"),
        (legacy("trace", "output", "$..name"), "wildcards"),
        (legacy("trace", "output", "$.a[?(@.x)]"), "filters"),
        (legacy("session", "input"), "unknown object 'session'"),
        ({"variable": "v", "source": None, "jsonPath": None}, "never configured"),
    ],
)
def test_mappings_that_cannot_be_read_are_refused(mapping: dict[str, Any], why: str) -> None:
    with pytest.raises(Untranslatable, match=why.replace("[", r"\[").replace("(", r"\(")):
        legacy_path(mapping) if "langfuseObject" in mapping else v4_path(mapping, "observation")


def test_trace_filters() -> None:
    assert trace_filter(
        [
            {"type": "stringOptions", "column": "environment", "operator": "none of", "value": ["dev"]},
            {"type": "stringOptions", "column": "traceName", "operator": "any of", "value": ["agent"]},
            {"type": "arrayOptions", "column": "tags", "operator": "any of", "value": ["x"]},
            {"type": "string", "column": "userId", "operator": "=", "value": "u"},
        ]
    ) == {"exclude_environments": ["dev"], "trace_name": "agent", "tags": ["x"], "user_id": "u"}
    for condition in (
        {"type": "string", "column": "Name", "operator": "contains", "value": "ag"},
        {"type": "arrayOptions", "column": "Tags", "operator": "any of", "value": ["a", "b"]},
        {"type": "datetime", "column": "Timestamp", "operator": ">", "value": "2026-01-01T00:00:00Z"},
        {"type": "null", "column": "parentObservationId", "operator": "is null"},
    ):
        with pytest.raises(Untranslatable, match="no equivalent"):
            trace_filter([condition])


def test_observation_filters() -> None:
    observations, traces = observation_filter(
        [
            {"type": "stringOptions", "column": "type", "operator": "any of", "value": ["generation", "AGENT"]},
            {"type": "stringOptions", "column": "level", "operator": "any of", "value": ["ERROR"]},
            {"type": "stringObject", "column": "metadata", "key": "k", "operator": "=", "value": "v"},
            {"type": "stringOptions", "column": "environment", "operator": "any of", "value": ["prod"]},
        ]
    )
    assert observations == {"types": ["GENERATION", "AGENT"], "levels": ["ERROR"], "metadata": {"k": "v"}}
    assert traces == {"environments": ["prod"]}


def test_every_written_target_validates_and_names_are_unique() -> None:
    helpful = {"id": "e", "name": "Helpfulness", "type": "llm_as_judge"}
    rules = [
        {"name": "a/b", "target": "trace", "evaluators": [{"evaluator": helpful, "mapping": []}]},
        {"name": "a b", "target": "trace", "evaluators": [{"evaluator": helpful, "mapping": []}]},
        {
            "name": "code",
            "target": "trace",
            "evaluators": [{"evaluator": {**helpful, "type": "code"}, "mapping": None}],
        },
        {"name": "none", "target": "trace", "evaluators": []},
        {
            "name": "long",
            "target": "trace",
            "scoreName": "x" * 40,
            "evaluators": [{"evaluator": helpful, "mapping": []}],
        },
    ]
    result = translate_rules(rules, [])
    assert [t.settings["name"] for t in result.targets] == ["a-b", "a-b-2"]
    for target in result.targets:
        TargetSettings.model_validate(target.settings)
    assert [name for name, _ in result.skipped] == ["code", "none", "long"]
    assert "a code evaluator" in result.skipped[0][1] and "no evaluator is assigned" in result.skipped[1][1]


def test_dataset_filters_become_names() -> None:
    from trace_scorer.langfuse.server.rule_import import dataset_filter

    names = {"d1": "alpha", "d2": "beta", "d3": "gamma"}
    any_of = {"type": "stringOptions", "column": "datasetId", "operator": "any of", "value": ["d3", "d1"]}
    none_of = {"type": "stringOptions", "column": "Dataset", "operator": "none of", "value": ["d2"]}
    assert dataset_filter([any_of], names) == ["alpha", "gamma"]
    assert dataset_filter([none_of], names) == ["alpha", "gamma"]
    assert dataset_filter([], names) == ["alpha", "beta", "gamma"]
    with pytest.raises(Untranslatable, match="d9 not found"):
        dataset_filter([{**any_of, "value": ["d9"]}], names)
    with pytest.raises(Untranslatable, match="names are unknown"):
        dataset_filter([any_of], {})
    with pytest.raises(Untranslatable, match="leaves no dataset"):
        dataset_filter([{**none_of, "value": ["d1", "d2", "d3"]}], names)

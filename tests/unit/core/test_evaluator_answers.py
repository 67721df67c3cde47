"""Langfuse's evaluators read tolerantly (langfuse/server/evaluators.py): what a 4.16.0 server answers, and the
shapes the unstable API may still take — fields missing, of another type, or unusable here."""

from __future__ import annotations

from typing import Any

import pytest

from trace_scorer.judge.definition import JudgeDefinition
from trace_scorer.langfuse.server.evaluators import Unusable, judge_definition

MANAGED = {  # as a real 4.16.0 lists a managed evaluator (§7): NUMERIC, descriptions, no range, no model
    "id": "cm-1",
    "name": "Helpfulness",
    "type": "llm_as_judge",
    "scope": "managed",
    "version": 1,
    "prompt": "Judge {{query}} against {{generation}}",
    "variables": ["query", "generation"],
    "mapping": None,
    "outputDefinition": {
        "dataType": "NUMERIC",
        "score": {"description": "0 to 1"},
        "reasoning": {"description": "why"},
    },
    "modelConfig": None,
    "evaluationRuleCount": 0,
    "createdAt": "2026-11-16T00:00:00.000Z",
    "updatedAt": "2026-11-16T00:00:00.000Z",
}


def test_a_managed_evaluator_as_a_real_server_lists_it() -> None:
    found = judge_definition(MANAGED)
    assert isinstance(found, JudgeDefinition)
    assert (found.name, found.source, found.version, found.evaluator_id) == (
        "Helpfulness",
        "langfuse:managed",
        1,
        "cm-1",
    )
    assert found.variables == ("query", "generation") and found.default_paths == {}
    assert (found.output.data_type, found.output.min_value, found.output.max_value) == ("NUMERIC", None, None)
    assert (found.output.score, found.output.reasoning) == ("0 to 1", "why")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"variables": None}, ("query", "generation")),  # derived from the prompt
        ({"variables": ["query", "extra"]}, ("query", "generation", "extra")),
        ({"version": "2"}, None),  # a version that is not a number is not recorded
        ({"scope": None}, "langfuse:project"),
        ({"outputDefinition": {"score": {"description": "s", "minValue": 1, "maxValue": 10}}}, (1.0, 10.0)),
        (
            {
                "mapping": [
                    {"variable": "query", "source": "input", "jsonPath": "$.q"},
                    {"variable": "generation", "source": None},
                    {"variable": "x", "source": "tool_calls", "jsonPath": "$[*]"},
                    "junk",
                ]
            },
            {"query": ("$.trace.input.q",)},
        ),
    ],
)
def test_tolerated_shapes(change: dict[str, Any], expected: Any) -> None:
    found = judge_definition({**MANAGED, **change})
    assert isinstance(found, JudgeDefinition)
    key = next(iter(change))
    actual = {
        "variables": found.variables,
        "version": found.version,
        "scope": found.source,
        "outputDefinition": (found.output.min_value, found.output.max_value),
        "mapping": dict(found.default_paths),
    }[key]
    assert actual == expected


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"type": "code", "sourceCode": "def evaluate(ctx): ..."}, "a code evaluator"),
        ({"prompt": "  "}, "no prompt"),
        ({"prompt": None}, "no prompt"),
        ({"outputDefinition": None}, "no outputDefinition"),
        ({"outputDefinition": {"dataType": "TEXT"}}, "unknown output data type 'TEXT'"),
        ({"outputDefinition": {"dataType": "CATEGORICAL", "score": {"categories": ["only"]}}}, "fewer than two"),
        ({"outputDefinition": {"dataType": "NUMERIC", "score": {"minValue": 5, "maxValue": 1}}}, "range 5 > 1"),
    ],
)
def test_unusable_evaluators_say_why(change: dict[str, Any], reason: str) -> None:
    found = judge_definition({**MANAGED, **change})
    assert isinstance(found, Unusable) and reason in found.reason


def test_boolean_and_categorical_outputs() -> None:
    boolean = judge_definition({**MANAGED, "outputDefinition": {"dataType": "BOOLEAN", "score": {}, "reasoning": {}}})
    assert isinstance(boolean, JudgeDefinition) and boolean.output.data_type == "BOOLEAN"
    categorical = judge_definition(
        {
            **MANAGED,
            "outputDefinition": {
                "dataType": "CATEGORICAL",
                "score": {"description": "d", "categories": ["a", "b", "a", ""], "shouldAllowMultipleMatches": True},
            },
        }
    )
    assert isinstance(categorical, JudgeDefinition) and categorical.output.categories == ("a", "b")

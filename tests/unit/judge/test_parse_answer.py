"""``parse_answer`` reads a valid answer once (pydantic's JSON parser); pinned to the two-step path it
replaced (``json.loads``'s verdict first, then validation) on answers of every kind."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from trace_scorer.config.common import errors_in_one_line
from trace_scorer.judge.structured import AnswerRejected, extract_json_text, parse_answer


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    verdict: Literal[0, 1]


class Topics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topics: list[str] = Field(min_length=1)
    score: float

    @model_validator(mode="after")
    def _allowed(self, info: ValidationInfo) -> Topics:
        allowed = (info.context or {}).get("allowed")
        if allowed is not None and not set(self.topics) <= set(allowed):
            raise ValueError("a topic is not allowed")
        return self


def two_step(text: str | None, schema: type[BaseModel], context: dict[str, Any] | None = None) -> BaseModel:
    """The path before: ``json.loads`` first (re-encoding what it reads only leniently), then validation."""
    if text is None or not text.strip():
        raise AnswerRejected("the answer was empty")
    candidate = extract_json_text(text)
    try:
        json.loads(candidate)
    except json.JSONDecodeError:
        try:
            candidate = json.dumps(json.loads(candidate, strict=False), ensure_ascii=False)
        except json.JSONDecodeError as exc:
            raise AnswerRejected(f"the answer is not valid JSON ({exc.msg} at position {exc.pos})") from None
    try:
        return schema.model_validate_json(candidate, context=context)
    except ValidationError as exc:
        problems = errors_in_one_line(exc, root="(root)", as_raised=True)
        raise AnswerRejected(f"the JSON does not match the required format: {problems}") from None


ANSWERS = [
    '{"reasoning": "fine", "verdict": 1}',
    '  {"reasoning":"fine","verdict":0}\n',
    '```json\n{"reasoning": "fine", "verdict": 1}\n```',
    'Here it is: {"reasoning": "fine", "verdict": 1} hope it helps',
    '{"reasoning": "a\nb", "verdict": 1}',  # a raw line break: read leniently, re-encoded
    '{"reasoning": "a\tb\u0001", "verdict": 0}',
    '{"reasoning": "\\ud800", "verdict": 1}',  # a lone surrogate escaped
    '{"reasoning": "\u00e9\u4e2d\U0001f600", "verdict": 1}',
    '{"reasoning": "x", "verdict": 1.0}',
    '{"reasoning": "x", "verdict": 1e0}',
    '{"reasoning": "x", "verdict": true}',
    '{"reasoning": "x", "verdict": 2}',
    '{"reasoning": "x", "verdict": "1"}',
    '{"reasoning": "x", "verdict": NaN}',
    '{"reasoning": "x", "verdict": Infinity}',
    '{"reasoning": "x", "verdict": 01}',
    '{"reasoning": "x", "verdict": 12345678901234567890123}',
    '{"reasoning": "x", "verdict": 1,}',
    '{"reasoning": "x", "verdict": 1} trailing',
    '{"reasoning": "x", "reasoning": "y", "verdict": 1}',
    '{"reasoning": "x", "verdict": 1, "extra": 2}',
    '{"reasoning": "x"}',
    '{"reasoning": null, "verdict": 1}',
    "{'reasoning': 'x', 'verdict': 1}",
    '{"reasoning": "x", "verdict": 1',
    "no json here",
    "",
    "   ",
    None,
    "[1, 2]",
    '{"a": {"b": [1, {"c": "}"}]}}',
]


def outcome(parse: Any, text: str | None, schema: type[BaseModel], context: dict[str, Any] | None = None) -> Any:
    try:
        return ("value", parse(text, schema, context))
    except AnswerRejected as exc:
        return ("rejected", str(exc))


@pytest.mark.parametrize("text", ANSWERS)
def test_a_verdict_is_read_as_the_two_step_path_read_it(text: str | None) -> None:
    assert outcome(parse_answer, text, Verdict) == outcome(two_step, text, Verdict)


@pytest.mark.parametrize(
    ("text", "context"),
    [
        ('{"topics": ["a", "b"], "score": 0.5}', {"allowed": ["a", "b"]}),
        ('{"topics": ["a", "c"], "score": 0.5}', {"allowed": ["a", "b"]}),
        ('{"topics": [], "score": 1}', None),
        ('{"topics": ["a\nb"], "score": 1}', {"allowed": ["a\nb"]}),
        ('{"topics": ["a"], "score": "0.5"}', None),
    ],
)
def test_a_schema_with_context_is_read_as_the_two_step_path_read_it(text: str, context: dict[str, Any] | None) -> None:
    assert outcome(parse_answer, text, Topics, context) == outcome(two_step, text, Topics, context)

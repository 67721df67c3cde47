"""The reference-free checks (issue 26 item 2) on hand-made samples: tool_call_validity (including invalid
schemas and hostile arguments), tool_errors, tool_loops, answer_completeness and the trace facts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.metrics import call, checked, sample
from trace_scorer.metrics.answer_completeness import AnswerCompleteness
from trace_scorer.metrics.base import Failed, MetricOptions, Score, Skipped
from trace_scorer.metrics.latency import Latency
from trace_scorer.metrics.registry import default_registry
from trace_scorer.metrics.tool_call_count import ToolCallCount
from trace_scorer.metrics.tool_call_validity import ToolCallValidity, ToolCallValidityOptions
from trace_scorer.metrics.tool_errors import ToolErrors
from trace_scorer.metrics.tool_loops import ToolLoops, ToolLoopsOptions
from trace_scorer.metrics.total_cost import TotalCost
from trace_scorer.metrics.total_tokens import TotalTokens
from trace_scorer.sample import Message, Sample, ToolCall, ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
        "additionalProperties": False,
    },
)


async def validity(s: Sample, **options: Any) -> Score | Skipped:
    metric = ToolCallValidity("tool_call_validity", ToolCallValidityOptions.model_validate(options))
    outcome = await metric.score(s, {})
    assert isinstance(outcome, Score | Skipped), outcome
    return checked(outcome) if isinstance(outcome, Score) else outcome


# -- tool_call_validity -----------------------------------------------------------------------------------


async def test_validity_valid_invalid_and_undeclared_calls_with_reasons() -> None:
    s = sample(
        tools=[WEATHER],
        tool_calls=[
            call("get_weather", city="Tokyo"),
            call("get_weather", city="Paris", days=0),  # below the minimum
            call("get_weather", town="Oslo"),  # required missing, extra key
            call("book_flight", to="Rome"),  # not declared
        ],
    )
    result = await validity(s)
    assert isinstance(result, Score)
    assert result.value == pytest.approx(1 / 4)
    invalid = {item["index"]: item for item in result.details["invalid"]}
    assert set(invalid) == {1, 2, 3}
    assert "days" in invalid[1]["reasons"][0] and "minimum" in invalid[1]["reasons"][0]
    assert any("'city' is a required property" in r for r in invalid[2]["reasons"])
    assert invalid[3]["reasons"] == ["the tool was not declared"]
    assert "1 of 4 tool calls valid" in result.comment


async def test_validity_is_skipped_without_declared_tools_or_calls() -> None:
    metric = ToolCallValidity("tool_call_validity", ToolCallValidityOptions())
    assert metric.missing_inputs(sample(tool_calls=[call("get_weather", city="x")])) == ["tools"]
    assert metric.missing_inputs(sample(tools=[WEATHER])) == ["tool_calls"]
    result = await validity(sample(tools=[WEATHER], tool_calls=[]))
    assert isinstance(result, Skipped) and "no tool call" in result.reason


async def test_declared_empty_tool_list_makes_every_call_undeclared() -> None:
    result = await validity(sample(tools=[], tool_calls=[call("get_weather", city="Tokyo")]))
    assert isinstance(result, Score) and result.value == 0.0


async def test_tool_without_schema_takes_any_arguments() -> None:
    s = sample(tools=[ToolSpec(name="ping")], tool_calls=[call("ping", anything=[1, 2])])
    result = await validity(s)
    assert isinstance(result, Score) and result.value == 1.0


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "objekt"}, "invalid"),
        ({"type": "object", "properties": {"a": {"minimum": "one"}}}, "invalid"),
        ({"type": "object", "required": "city"}, "invalid"),
        ("not a schema", "not a JSON Schema"),
        (42, "not a JSON Schema"),
        ({"$ref": "https://example.invalid/schema.json"}, "cannot be checked"),
        ({"$ref": "#/definitions/missing"}, "cannot be checked"),
    ],
)
async def test_invalid_schema_counts_the_call_invalid_with_the_reason(schema: Any, reason: str) -> None:
    s = sample(tools=[ToolSpec(name="t", parameters=schema)], tool_calls=[call("t", a=1), call("ok")])
    s.tools = [*(s.tools or []), ToolSpec(name="ok", parameters={"type": "object"})]
    result = await validity(s)
    assert isinstance(result, Score)
    assert result.value == 0.5
    (bad,) = result.details["invalid"]
    assert bad["name"] == "t" and reason in bad["reasons"][0]


async def test_deeply_nested_schema_and_arguments_do_not_crash() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(3000):
        schema = {"type": "object", "properties": {"a": schema}}
    deep: Any = 1
    for _ in range(3000):
        deep = {"a": deep}
    hostile = ToolCall.model_construct(name="t", arguments=deep)
    s = sample(tools=[ToolSpec(name="t", parameters=schema)], tool_calls=[hostile])
    result = await validity(s)
    assert isinstance(result, Score | Skipped)
    if isinstance(result, Score):
        assert result.value == 0.0
        assert "deeply" in result.details["invalid"][0]["reasons"][0]


async def test_catastrophic_pattern_runs_in_linear_time_engine() -> None:
    """``(a+)+$`` against 'aaaa…!' takes exponential time on Python's re; on RE2 it is a plain mismatch."""
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}}}
    hostile = "a" * 5000 + "!"
    s = sample(tools=[ToolSpec(name="t", parameters=schema)], tool_calls=[call("t", q=hostile), call("t", q="aaa")])
    result = await validity(s)
    assert isinstance(result, Score) and result.value == 0.5
    assert "does not match" in result.details["invalid"][0]["reasons"][0]


async def test_pattern_properties_use_the_safe_engine_too() -> None:
    schema = {"type": "object", "patternProperties": {"^(x+)+$": {"type": "integer"}}}
    s = sample(tools=[ToolSpec(name="t", parameters=schema)], tool_calls=[call("t", xxx="no"), call("t", xxx=3)])
    result = await validity(s)
    assert isinstance(result, Score) and result.value == 0.5


async def test_a_pattern_re2_refuses_is_a_reason_not_a_crash() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(a)\\1"}}}
    result = await validity(sample(tools=[ToolSpec(name="t", parameters=schema)], tool_calls=[call("t", q="aa")]))
    assert isinstance(result, Score) and result.value == 0.0
    assert "cannot be checked" in result.details["invalid"][0]["reasons"][0]


async def test_huge_arguments_are_left_unchecked_not_validated() -> None:
    huge = "x" * 2_000_000
    s = sample(tools=[WEATHER], tool_calls=[call("get_weather", city=huge), call("get_weather", city="Oslo")])
    result = await validity(s, max_argument_chars=10_000)
    assert isinstance(result, Score) and result.value == 1.0
    assert result.details["checked"] == 1
    assert result.details["unchecked"][0]["index"] == 0
    only_huge = await validity(sample(tools=[WEATHER], tool_calls=[call("get_weather", city=huge)]))
    assert isinstance(only_huge, Skipped) and "could be checked" in only_huge.reason


async def test_schema_dialect_named_by_the_schema_is_used() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}}}  # fmt: skip
    s = sample(tools=[ToolSpec(name="t", parameters=draft4)], tool_calls=[call("t", n=5), call("t", n=4)])
    result = await validity(s)
    assert isinstance(result, Score) and result.value == 0.5


# -- tool_errors ------------------------------------------------------------------------------------------


async def test_tool_errors_share_of_failed_executions_names_the_tools() -> None:
    s = sample(
        tool_calls=[
            ToolCall(name="search", result="3 flights"),
            ToolCall(name="book", error="HTTP 503 from booking API"),
            ToolCall(name="book", error="timeout"),
            ToolCall(name="lookup"),  # no result, no error: not an execution we can judge
        ]
    )
    result = checked(await ToolErrors("tool_errors", MetricOptions()).score(s, {}))
    assert result.value == pytest.approx(2 / 3)
    assert result.comment == "2 of 3 tool executions failed: book ×2"
    assert result.details["failed"][0] == {"name": "book", "error": "HTTP 503 from booking API"}


async def test_tool_errors_zero_and_skipped() -> None:
    ok = checked(await ToolErrors("tool_errors", MetricOptions()).score(sample(tool_calls=[call("a", result=1)]), {}))
    assert ok.value == 0.0
    none = await ToolErrors("tool_errors", MetricOptions()).score(sample(tool_calls=[call("a")]), {})
    assert isinstance(none, Skipped)
    assert ToolErrors("tool_errors", MetricOptions()).missing_inputs(sample()) == ["tool_calls"]


# -- tool_loops -------------------------------------------------------------------------------------------


async def test_tool_loops_counts_identical_calls_anywhere_beyond_the_limit() -> None:
    calls = [call("search", q="a", page=1), call("other"), call("search", page=1, q="a"), call("search", q="a", page=1)]
    metric = ToolLoops("tool_loops", ToolLoopsOptions(max_repeats=2))
    looped = checked(await metric.score(sample(tool_calls=calls), {}))
    assert looped.value == 1.0 and "search ×3" in looped.comment
    fine = checked(await ToolLoops("tool_loops", ToolLoopsOptions(max_repeats=3)).score(sample(tool_calls=calls), {}))
    assert fine.value == 0.0
    different = [call("search", q="a"), call("search", q="b"), call("search", q="c")]
    assert checked(await metric.score(sample(tool_calls=different), {})).value == 0.0
    assert checked(await metric.score(sample(tool_calls=[]), {})).value == 0.0


def test_tool_loops_option_is_validated() -> None:
    with pytest.raises(ValueError, match="max_repeats"):
        ToolLoopsOptions.model_validate({"max_repeats": 0})


# -- answer_completeness ----------------------------------------------------------------------------------


ENDS_ON_CALL = Message(role="assistant", tool_calls=[ToolCall(name="search")])


@pytest.mark.parametrize(
    ("fields", "value", "words"),
    [
        ({"response": "It is 18 °C.", "finish_reason": "stop"}, 1.0, "not cut off"),
        ({"response": "It is 18", "finish_reason": "length"}, 0.0, "cut off"),
        ({"response": "Es sind", "finish_reason": "MAX_TOKENS"}, 0.0, "cut off"),
        ({"response": "Sure", "finish_reason": "max_tokens"}, 0.0, "cut off"),
        ({"response": "", "finish_reason": "content_filter"}, 0.0, "filtered"),
        ({"response": "  "}, 0.0, "empty"),
        ({"response": "", "messages": [Message(role="user", content="hi"), ENDS_ON_CALL]}, 0.0, "tool call"),
        ({"response": "Hello!", "messages": [Message(role="user", content="hi")]}, 1.0, ""),
    ],
)
async def test_answer_completeness(fields: dict[str, Any], value: float, words: str) -> None:
    result = checked(await AnswerCompleteness("answer_completeness", MetricOptions()).score(sample(**fields), {}))
    assert result.value == value
    assert words in result.comment


def test_answer_completeness_skipped_when_the_answer_is_unknown() -> None:
    metric = AnswerCompleteness("answer_completeness", MetricOptions())
    assert metric.missing_inputs(sample(messages=[Message(role="user", content="hi")])) == ["response"]


# -- trace facts ------------------------------------------------------------------------------------------


async def test_trace_facts_are_posted_as_they_are_and_skipped_when_absent() -> None:
    s = sample(latency=12.5, total_tokens=4321, total_cost=0.0123, tool_calls=[call("a"), call("b")])
    assert (await Latency("latency", MetricOptions()).score(s, {})) == Score(12.5, "12.5 s")
    assert (await TotalTokens("total_tokens", MetricOptions()).score(s, {})).value == 4321  # type: ignore[union-attr]
    assert (await TotalCost("total_cost", MetricOptions()).score(s, {})).value == 0.0123  # type: ignore[union-attr]
    assert (await ToolCallCount("tool_call_count", MetricOptions()).score(s, {})).value == 2  # type: ignore[union-attr]
    for cls, name in ((Latency, "latency"), (TotalTokens, "total_tokens"), (TotalCost, "total_cost")):
        assert cls(name, MetricOptions()).missing_inputs(sample()) == [name]
    assert ToolCallCount("tool_call_count", MetricOptions()).missing_inputs(sample()) == ["tool_calls"]


async def test_pipeline_lets_facts_leave_0_1_but_not_other_metrics() -> None:
    """Values outside [0, 1] are refused unless the metric declares its range (docs/metrics.md)."""
    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.scoring.pipeline import Pipeline
    from trace_scorer.scoring.plan import build_plan

    target = TargetSettings.model_validate(
        {"name": "t", "metrics": [{"metric": "latency"}, {"metric": "total_tokens"}, {"metric": "tool_call_count"}]}
    )
    pipeline = Pipeline(build_plan(target, registry=default_registry()))
    result = await pipeline.score_sample(sample(latency=3.25, total_tokens=900, tool_calls=[]))
    assert result.outcomes["latency"] == Score(3.25, "3.25 s")
    assert isinstance(result.outcomes["total_tokens"], Score) and result.outcomes["total_tokens"].value == 900
    negative = Sample.model_construct(id="x", latency=-1.0, notes=[], metadata={})
    bad = await pipeline.score_sample(negative)
    assert isinstance(bad.outcomes["latency"], Failed) and "outside [0, ∞]" in bad.outcomes["latency"].reason


def test_sample_refuses_negative_or_non_finite_facts() -> None:
    for fields in ({"latency": -1}, {"total_tokens": -5}, {"total_cost": float("nan")}):
        with pytest.raises(ValueError):
            Sample(id="x", **fields)
    json.dumps(Sample(id="x", latency=1.0).model_dump(mode="json"))

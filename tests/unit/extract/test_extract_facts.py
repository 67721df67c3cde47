"""Trace facts read from observation rows (extract/facts.py): the declared tools in each SDK's shape,
finish reasons, latency, tokens, cost, and tool errors; absent stays None."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trace_scorer.extract import extract_sample

T0 = "2026-03-02T09:00:00.000Z"


def row(ident: str, kind: str, *, parent: str | None = "root", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": ident,
        "traceId": "t1",
        "type": kind,
        "name": fields.pop("name", ident),
        "parentObservationId": parent,
        "startTime": fields.pop("start", T0),
        "endTime": fields.pop("end", "2026-03-02T09:00:01.000Z"),
        "level": fields.pop("level", "DEFAULT"),
        "statusMessage": fields.pop("status", None),
        "metadata": fields.pop("metadata", {}),
    }
    for key in ("input", "output"):
        if key in fields:
            base[key] = json.dumps(fields.pop(key))
    base.update(fields)
    return base


def trace(*children: dict[str, Any], root_output: Any = "done", end: str = "2026-03-02T09:00:04.500Z") -> list[dict]:
    return [row("root", "SPAN", parent=None, output=root_output, end=end, input="hi"), *children]


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize(
    ("generation_input", "metadata"),
    [
        # the Langfuse OpenAI wrapper (Chat Completions)
        ({"messages": [{"role": "user", "content": "hi"}],
          "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]}, {}),
        # OpenAI Responses
        ({"input": "hi", "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}]}, {}),
        # Anthropic Messages
        ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "get_weather", "input_schema": SCHEMA}]},
         {}),
        # Gemini
        ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
          "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": SCHEMA}]}]}, {}),
        # LangChain CallbackHandler: definitions appended as role "tool" messages
        ([{"role": "user", "content": "hi"},
          {"role": "tool", "content": {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}}],
         {}),
        # OTel GenAI: gen_ai.tool.definitions attribute (v4 metadata values are strings)
        ([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
         {"attributes": {"gen_ai.tool.definitions": json.dumps(
             [{"type": "function", "name": "get_weather", "parameters": SCHEMA}])}}),
        # the same, as Langfuse v4 returns metadata: flattened to dotted keys
        ([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}],
         {"attributes.gen_ai.tool.definitions": json.dumps(
             [{"type": "function", "name": "get_weather", "parameters": SCHEMA}])}),
    ],
)  # fmt: skip
def test_declared_tools_in_each_sdk_shape(generation_input: Any, metadata: dict[str, Any]) -> None:
    sample = extract_sample(trace(row("g", "GENERATION", input=generation_input, output="ok", metadata=metadata)))
    assert sample.tools is not None
    assert [(t.name, t.parameters) for t in sample.tools] == [("get_weather", SCHEMA)]


def test_no_tools_key_is_absent_and_an_empty_list_is_empty() -> None:
    without = extract_sample(trace(row("g", "GENERATION", input=[{"role": "user", "content": "hi"}], output="ok")))
    assert without.tools is None
    empty = extract_sample(trace(row("g", "GENERATION", input={"messages": [], "tools": []}, output="ok")))
    assert empty.tools == []


def test_tools_of_several_generations_are_joined_once_per_name() -> None:
    first = {"messages": [], "tools": [{"type": "function", "function": {"name": "a"}}]}
    second = {"messages": [], "tools": [{"type": "function", "function": {"name": "a"}}, {"name": "b"}]}
    sample = extract_sample(trace(row("g1", "GENERATION", input=first), row("g2", "GENERATION", input=second)))
    assert [t.name for t in sample.tools or ()] == ["a", "b"]


def test_a_repeated_tool_list_keeps_the_first_definition_of_each_name() -> None:
    """Every generation repeats its tools: a list equal to one read before adds nothing (it is not read
    again), while a changed list adds its new names and keeps each known name's first definition."""
    one = {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}
    changed = {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "x": 1}}}
    inputs = [
        {"messages": [], "tools": [one]},
        {"messages": [], "tools": [one]},  # equal: not read again
        {"messages": [], "functions": [one]},  # equal under another key: the same names
        {"messages": [], "tools": [changed, {"name": "b", "parameters": 1.0}]},
        {"messages": [], "tools": [changed, {"name": "b", "parameters": 1}]},  # == the one before (1 == 1.0)
    ]
    generations = [row(f"g{n}", "GENERATION", input=value) for n, value in enumerate(inputs)]
    sample = extract_sample(trace(*generations))
    assert [(t.name, t.parameters) for t in sample.tools or ()] == [("a", {"type": "object"}), ("b", 1.0)]
    assert isinstance((sample.tools or [])[1].parameters, float)


def test_hostile_tool_lists_are_read_as_far_as_they_make_sense() -> None:
    hostile = {"messages": [], "tools": [42, "x", {"function": "nope"}, {"name": ""}, {"name": "ok", "parameters": 7}]}
    sample = extract_sample(trace(row("g", "GENERATION", input=hostile)))
    assert [(t.name, t.parameters) for t in sample.tools or ()] == [("ok", 7)]
    not_a_list = extract_sample(trace(row("g", "GENERATION", input={"messages": [], "tools": 42})))
    assert not_a_list.tools == []


@pytest.mark.parametrize(
    ("output", "metadata", "expected"),
    [
        ({"role": "assistant", "content": "It is"}, {}, None),  # the OpenAI wrapper records no finish reason
        ({"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": "length"}]}, {}, "length"),
        ({"type": "message", "role": "assistant", "content": [], "stop_reason": "max_tokens"}, {}, "max_tokens"),
        ({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "MAX_TOKENS"}]}, {}, "MAX_TOKENS"),
        ([{"role": "assistant", "parts": [], "finish_reason": "stop"}], {}, "stop"),
        ({"object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
          "output": []}, {}, "max_output_tokens"),
        ({"content": "x", "type": "ai", "response_metadata": {"finish_reason": "length"}}, {}, "length"),
        ("x", {"attributes": {"gen_ai.response.finish_reasons": '["length"]'}}, "length"),
    ],
)  # fmt: skip
def test_finish_reason_of_the_last_generation(output: Any, metadata: dict[str, Any], expected: str | None) -> None:
    early = row("g0", "GENERATION", input="q", output={"choices": [{"finish_reason": "tool_calls"}]})
    sample = extract_sample(trace(early, row("g1", "GENERATION", input="q", output=output, metadata=metadata,
                                             start="2026-03-02T09:00:02.000Z")))  # fmt: skip
    assert sample.finish_reason == (expected or "tool_calls")


def test_latency_tokens_and_cost() -> None:
    g1 = row("g1", "GENERATION", input="q", output="a", usageDetails={"input": 100, "output": 20, "total": 120},
             costDetails={"input": 0.001, "output": 0.0004, "total": 0.0014}, totalCost=0.0014)  # fmt: skip
    g2 = row("g2", "GENERATION", input="q", output="a", usageDetails={"input": 50, "output": 5},
             costDetails={"input": 0.0005, "output": 0.0001})  # fmt: skip
    unpriced = row("g3", "GENERATION", input="q", output="a", usageDetails={}, costDetails={}, totalCost=0)
    sample = extract_sample(trace(g1, g2, unpriced))
    assert sample.latency == 4.5
    assert sample.total_tokens == 175
    assert sample.total_cost == pytest.approx(0.002)


def test_unknown_usage_and_cost_are_absent_not_zero() -> None:
    sample = extract_sample(trace(row("g", "GENERATION", input="q", output="a", usageDetails={}, costDetails={},
                                      totalCost=0)))  # fmt: skip
    assert sample.total_tokens is None and sample.total_cost is None


def test_latency_without_a_finished_root_spans_the_observations() -> None:
    rows = [
        row("a", "SPAN", parent=None, start="2026-03-02T09:00:00.000Z", end="2026-03-02T09:00:01.000Z"),
        row("b", "SPAN", parent=None, start="2026-03-02T09:00:00.500Z", end="2026-03-02T09:00:03.000Z"),
    ]
    assert extract_sample(rows).latency == 3.0
    assert extract_sample([row("a", "SPAN", parent=None, end=None)]).latency is None


def test_tool_errors_from_level_status_and_outputs() -> None:
    tool_message_error = {"content": "Error: order not found", "type": "tool", "name": "lookup",
                          "tool_call_id": "c2", "status": "error"}  # fmt: skip
    sample = extract_sample(
        trace(
            row("t1", "TOOL", name="search", input={"q": "x"}, level="ERROR", status="HTTP 503 from search"),
            row("t2", "TOOL", name="lookup", input={"id": 1}, output=tool_message_error),
            row("t3", "TOOL", name="fetch", input={"u": 1}, output={"content": [], "isError": True}),
            row("t4", "TOOL", name="calc", input={"x": 1}, output="Error: division by zero"),
            row("t5", "TOOL", name="ok", input={}, output={"status": "delivered"}),
        )
    )
    errors = {c.name: c.error for c in sample.tool_calls or ()}
    assert errors == {
        "search": "HTTP 503 from search",
        "lookup": "Error: order not found",
        "fetch": "the tool reported an error",
        "calc": "Error: division by zero",
        "ok": None,
    }


def test_tool_message_error_text_in_an_openai_conversation_marks_the_call() -> None:
    messages = [
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: no seats left"},
    ]  # fmt: skip
    sample = extract_sample(trace(row("g", "GENERATION", input={"messages": messages, "tools": []}, output="Sorry")))
    assert [(c.name, c.error) for c in sample.tool_calls or ()] == [("book", "Error: no seats left")]


def test_a_deeply_nested_output_loses_nothing_else() -> None:
    """As deep as a JSON text still parses: the finish reason is not looked for that far down."""
    g = row("g", "GENERATION", input={"messages": [], "tools": [{"name": "a"}]}, usageDetails={"total": 9})
    g["output"] = "[" * 900 + '{"finish_reason": "length"}' + "]" * 900
    sample = extract_sample(trace(g))
    assert sample.finish_reason is None
    assert [t.name for t in sample.tools or ()] == ["a"] and sample.total_tokens == 9

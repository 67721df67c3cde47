"""The double-counting rule (docs/formats.md "Tool calls"): a call seen as an assistant tool_calls entry and as the TOOL
observation that ran it counts once, by call id, or by name and arguments in order."""

from __future__ import annotations

import json
from typing import Any

from trace_scorer.extract import RAW_ARGUMENTS_KEY, extract_sample


def openai_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def test_paired_by_call_id(make_row):
    rows = [
        make_row("root", output="done"),
        make_row("g", "GENERATION", parent="root", input="go", output=assistant(openai_call("c1", "f", x=1))),
        # The TOOL observation's arguments differ in form (id given): still the same call.
        make_row(
            "t", "TOOL", "f", parent="root", input={"x": 1}, output="r", metadata={"tool_call_id": "c1"}
        ),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.name, c.id, c.result) for c in sample.tool_calls] == [("f", "c1", "r")]


def test_paired_by_name_and_arguments_in_order_when_the_tool_has_no_id(make_row):
    rows = [
        make_row("root", output="done"),
        make_row(
            "g",
            "GENERATION",
            parent="root",
            input="go",
            output=assistant(
                openai_call("c1", "f", x=1), openai_call("c2", "f", x=1), openai_call("c3", "g", y=2)
            ),
        ),
        make_row("t1", "TOOL", "f", parent="root", input={"x": 1}, output="first"),
        make_row("t2", "TOOL", "f", parent="root", input={"x": 1}, output="second"),
        make_row("t3", "TOOL", "g", parent="root", input={"y": 2}, output="third"),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.name, c.id, c.result) for c in sample.tool_calls] == [
        ("f", "c1", "first"),
        ("f", "c2", "second"),
        ("g", "c3", "third"),
    ]


def test_the_same_call_made_twice_counts_twice(make_row):
    """Two model calls and two executions of f(x=1): two calls, not one and not four."""
    rows = [
        make_row("root", output="done"),
        make_row(
            "g1", "GENERATION", parent="root", input="go", output=assistant(openai_call("c1", "f", x=1))
        ),
        make_row("t1", "TOOL", "f", parent="root", input={"x": 1}, output="a"),
        make_row(
            "g2",
            "GENERATION",
            parent="root",
            input=[
                "go",
                assistant(openai_call("c1", "f", x=1)),
                {"role": "tool", "tool_call_id": "c1", "content": "a"},
            ],
            output=assistant(openai_call("c2", "f", x=1)),
        ),
        make_row("t2", "TOOL", "f", parent="root", input={"x": 1}, output="b"),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.id, c.result) for c in sample.tool_calls] == [("c1", "a"), ("c2", "b")]


def test_different_ids_are_different_calls(make_row):
    rows = [
        make_row("root", output="done"),
        make_row("g", "GENERATION", parent="root", input="go", output=assistant(openai_call("c1", "f", x=1))),
        make_row(
            "t", "TOOL", "f", parent="root", input={"x": 1}, output="r", metadata={"tool_call_id": "other"}
        ),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [c.id for c in sample.tool_calls] == ["c1", "other"]


def test_tool_run_by_code_is_placed_where_it_ran(make_row):
    """A TOOL observation no model asked for (a pre-fetch, an audit log) is a call of its own, in time
    order."""
    rows = [
        make_row("root", output="done", at=0),
        make_row("pre", "TOOL", "load_profile", parent="root", input={"user": "u1"}, output={}, at=1),
        make_row(
            "g", "GENERATION", parent="root", input="go", output=assistant(openai_call("c1", "f", x=1)), at=2
        ),
        make_row("t", "TOOL", "f", parent="root", input={"x": 1}, output="r", at=3),
        make_row("post", "TOOL", "audit_log", parent="root", input={"event": "done"}, output="ok", at=4),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [c.name for c in sample.tool_calls] == ["load_profile", "f", "audit_log"]


def test_tool_result_from_tool_message_when_no_tool_observation(make_row):
    rows = [
        make_row("root", output="18°C in Paris"),
        make_row(
            "g1",
            "GENERATION",
            parent="root",
            input="weather?",
            output=assistant(openai_call("c1", "w", city="Paris")),
        ),
        make_row(
            "g2",
            "GENERATION",
            parent="root",
            input=[
                "weather?",
                assistant(openai_call("c1", "w", city="Paris")),
                {"role": "tool", "tool_call_id": "c1", "content": "18°C"},
            ],
            output={"role": "assistant", "content": "18°C in Paris"},
        ),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.name, c.arguments, c.result) for c in sample.tool_calls] == [("w", {"city": "Paris"}, "18°C")]


def test_arguments_that_are_not_json_keep_the_call(make_row):
    truncated = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": '{"flight": "AF1'}}
    rows = [
        make_row("root", output="?"),
        make_row("g", "GENERATION", parent="root", input="go", output=assistant(truncated)),
        make_row("t", "TOOL", "lookup", parent="root", input="Paris", output="x"),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.name, c.arguments) for c in sample.tool_calls] == [
        ("book", {RAW_ARGUMENTS_KEY: '{"flight": "AF1'}),
        ("lookup", {RAW_ARGUMENTS_KEY: "Paris"}),
    ]
    assert sum("kept under '_raw'" in note for note in sample.notes) == 2


def test_python_repr_arguments_of_old_langchain_are_read(make_row):
    rows = [
        make_row("root", output="x"),
        make_row("t", "TOOL", "search", parent="root", input="{'q': 'kettle', 'n': 3}"),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert sample.tool_calls[0].arguments == {"q": "kettle", "n": 3}
    assert sample.notes == []


def test_arguments_with_non_string_keys_never_break_the_sample(make_row):
    rows = [
        make_row("root", output="x"),
        make_row("t1", "TOOL", "a", parent="root", input="{1: 'one'}"),  # a literal, but not keyword args
        make_row("t2", "TOOL", "b", parent="root", input={"q": 1}),
    ]
    rows[2]["input"] = {2: "two"}  # a Python caller handing objects, not JSON text
    rows[0]["metadata"] = {3: "three"}
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [c.arguments for c in sample.tool_calls] == [{RAW_ARGUMENTS_KEY: "{1: 'one'}"}, {"2": "two"}]
    assert sample.metadata == {"3": "three"}
    assert not any(note.startswith("extraction failed") for note in sample.notes)

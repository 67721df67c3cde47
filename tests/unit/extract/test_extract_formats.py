"""Each recognised format, end to end from realistic observation rows (tests/extract/fixtures)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trace_scorer.extract import RAW_ARGUMENTS_KEY, extract_sample
from trace_scorer.extract.messages import MessageReader, Side
from trace_scorer.extract.model import Notes
from trace_scorer.sample import Sample


def calls_of(sample: Sample) -> list[tuple[str, dict[str, Any], str | None]]:
    assert sample.tool_calls is not None
    return [(c.name, c.arguments, c.id) for c in sample.tool_calls]


def roles_of(sample: Sample) -> list[str]:
    assert sample.messages is not None
    return [m.role for m in sample.messages]


def test_openai_chat_completions_with_tools_and_messages_input(fixture_rows, items_by_trace):
    rows = fixture_rows("openai_chat")
    sample = extract_sample(rows, item=items_by_trace[rows[0]["traceId"]])

    assert calls_of(sample) == [
        ("search_flights", {"destination": "Paris", "date": "2024-01-15"}, "call_9fQk2LbX"),
        ("book_flight", {"flight_id": "AF123", "passenger": "Ivan Petrov"}, "call_Vb71nQeZ"),
    ]
    # Results come from the TOOL observations (structured), the @observe {"args","kwargs"} input read.
    assert sample.tool_calls is not None
    assert sample.tool_calls[0].result[0]["flight_id"] == "AF123"
    assert sample.tool_calls[1].result == {"booking_ref": "PNR7QX", "status": "confirmed"}
    assert roles_of(sample) == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sample.response is not None and sample.response.startswith("Done! Ivan Petrov is booked")
    assert sample.id == sample.trace_id == rows[0]["traceId"]
    assert sample.observation_id == next(r["id"] for r in rows if r["parentObservationId"] is None)
    assert sample.environment == "production"
    assert (
        sample.start_time is not None and sample.start_time.isoformat() == "2026-03-02T09:15:04.120000+00:00"
    )
    assert sample.notes == []


def test_openai_responses_function_call_items(fixture_rows):
    sample = extract_sample(fixture_rows("openai_responses"))

    assert calls_of(sample) == [("get_weather", {"city": "Tokyo", "units": "celsius"}, "call_TkW3s9Pq")]
    assert sample.tool_calls is not None
    assert sample.tool_calls[0].result == "Tokyo: 22°C, partly cloudy, humidity 61%"
    assert roles_of(sample) == ["system", "user", "assistant", "tool", "assistant"]
    assert sample.messages is not None
    assert sample.messages[3].tool_call_id == "call_TkW3s9Pq"
    assert sample.messages[-1].content.startswith("It's 22°C")
    assert sample.notes == []


def test_langchain_messages_tool_definitions_are_not_results(fixture_rows):
    sample = extract_sample(fixture_rows("langchain"))

    assert calls_of(sample) == [
        ("lookup_order", {"order_id": "A-1042"}, "call_lc_01"),
        ("issue_refund", {"order_id": "A-1042", "reason": "damaged"}, "call_lc_02"),
    ]
    # The two tool definitions appended to every ChatOpenAI input are not tool messages.
    assert roles_of(sample) == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sample.messages is not None
    assert all(m.tool_call_id for m in sample.messages if m.role == "tool")
    # The result is the ToolMessage's content, not the serialized ToolMessage.
    assert sample.tool_calls is not None
    assert sample.tool_calls[1].result == "Refund R-5531 issued: 89.90 USD to the original card."
    # Root output is a LangGraph state: the answer is its last AI message.
    assert sample.response is not None and sample.response.startswith("I'm sorry your kettle")
    assert sample.notes == []


def test_langchain_additional_kwargs_only_and_invalid_tool_calls(make_row):
    output = {
        "role": "assistant",
        "content": "",
        "additional_kwargs": {
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "x"}'},
                }
            ]
        },
        "invalid_tool_calls": [
            {
                "name": "lookup",
                "args": '{"id": 12',
                "id": "call_b",
                "error": "bad JSON",
                "type": "invalid_tool_call",
            }
        ],
    }
    rows = [
        make_row("root", "CHAIN", output="done"),
        make_row("g", "GENERATION", parent="root", input=[{"role": "user", "content": "hi"}], output=output),
    ]
    sample = extract_sample(rows)

    assert calls_of(sample) == [
        ("search", {"q": "x"}, "call_a"),
        ("lookup", {RAW_ARGUMENTS_KEY: '{"id": 12'}, "call_b"),
    ]
    assert any("lookup" in note and "not valid JSON" in note for note in sample.notes)


def test_langchain_state_dump_with_type_fields_and_role_pairs(make_row):
    state = {
        "messages": [
            {"type": "human", "content": "What is 2+2?"},
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": "calc", "args": {"expr": "2+2"}, "id": "c1"}],
            },
            {"type": "tool", "content": "4", "tool_call_id": "c1", "name": "calc"},
            {"type": "ai", "content": "2+2 is 4."},
        ]
    }
    rows = [
        make_row("root", "CHAIN", "LangGraph", input={"messages": [["user", "What is 2+2?"]]}, output=state)
    ]
    sample = extract_sample(rows)

    assert calls_of(sample) == [("calc", {"expr": "2+2"}, "c1")]
    assert sample.tool_calls is not None and sample.tool_calls[0].result == "4"
    assert sample.response == "2+2 is 4."
    assert roles_of(sample) == ["user", "assistant", "tool", "assistant"]


def test_otel_genai_parts_and_execute_tool_span(fixture_rows):
    sample = extract_sample(fixture_rows("otel_genai"))

    # The execute_tool span has no call id: it is the same call as the tool_call part (name+args).
    assert calls_of(sample) == [("get_forecast", {"city": "Berlin", "day": "tomorrow"}, "call_otel_7")]
    assert sample.tool_calls is not None
    assert sample.tool_calls[0].result["precipitation_probability"] == 0.8
    assert roles_of(sample) == ["user", "assistant", "tool", "assistant"]
    assert sample.response is not None and sample.response.startswith("Yes, take an umbrella")
    assert sample.environment == "staging"
    assert sample.notes == []


def test_anthropic_tool_use_and_tool_result_blocks(fixture_rows):
    sample = extract_sample(fixture_rows("anthropic"))

    assert calls_of(sample) == [
        ("get_invoice", {"invoice_id": "INV-88"}, "toolu_01HqV8"),
        ("refund_charge", {"charge_id": "ch_2"}, "toolu_01Zp3c"),
    ]
    assert sample.tool_calls is not None
    assert json.loads(sample.tool_calls[0].result)["invoice_id"] == "INV-88"
    assert sample.tool_calls[1].result == "refunded ch_2: 49.00 USD"  # list of text blocks → text
    assert roles_of(sample) == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert sample.messages is not None
    assert sample.messages[2].content == "Let me look at invoice INV-88."
    assert sample.notes == []


def test_tool_observations_only(fixture_rows):
    sample = extract_sample(fixture_rows("tool_observations"))

    assert calls_of(sample) == [
        ("lookup_order", {"order_id": "B-77"}, None),
        ("track_parcel", {"carrier": "UPS", "tracking_number": "1Z999AA10123456784"}, None),
    ]
    assert sample.tool_calls is not None and sample.tool_calls[1].result["eta"] == "2026-03-08"
    assert sample.response is not None and sample.response.startswith("Order B-77 is in transit")
    # No generation: the root's input is the user's turn, its output the answer.
    assert roles_of(sample) == ["user", "assistant"]


def test_finished_trace_without_answer_gives_empty_response(fixture_rows):
    sample = extract_sample(fixture_rows("no_answer"))

    assert sample.response == ""
    assert calls_of(sample) == [("search_kb", {"query": "reset router"}, "call_kb_1")]
    assert (
        sample.tool_calls is not None and sample.tool_calls[0].result[0]["title"] == "Resetting your router"
    )
    assert any("ended with an error" in note and "RateLimitError" in note for note in sample.notes)


def test_unfinished_trace_leaves_response_absent(make_row):
    rows = [make_row("root", "AGENT", input="hi", endTime=None)]
    sample = extract_sample(rows)
    assert sample.response is None
    assert any("not finished" in note for note in sample.notes)


def test_chat_completion_response_object_and_legacy_function_call(make_row):
    response = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "get_time", "arguments": '{"tz": "UTC"}'},
                },
            }
        ],
    }
    rows = [
        make_row("root", "SPAN", output="It is noon."),
        make_row(
            "g", "GENERATION", parent="root", input=[{"role": "user", "content": "time?"}], output=response
        ),
        make_row(
            "g2",
            "GENERATION",
            parent="root",
            input=[
                {"role": "user", "content": "time?"},
                response["choices"][0]["message"],
                {"role": "function", "name": "get_time", "content": "12:00"},
            ],
            output={"role": "assistant", "content": "It is noon."},
        ),
    ]
    sample = extract_sample(rows)
    assert calls_of(sample) == [("get_time", {"tz": "UTC"}, None)]
    assert roles_of(sample) == ["user", "assistant", "tool", "assistant"]


def test_responses_response_object_and_built_in_tools(make_row):
    response = {
        "id": "resp_1",
        "object": "response",
        "output": [
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Found it."}],
            },
        ],
    }
    rows = [make_row("g", "GENERATION", input="search the web", output=response)]
    sample = extract_sample(rows)
    assert sample.response == "Found it."
    assert sample.tool_calls == []
    assert any("web_search_call" in note for note in sample.notes)


def test_vercel_ai_sdk_parts(make_row):
    rows = [
        make_row(
            "g",
            "GENERATION",
            input=[
                {"role": "user", "content": [{"type": "text", "text": "refund policy?"}]},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool-call",
                            "toolCallId": "c1",
                            "toolName": "search",
                            "args": {"q": "refund"},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "content": [{"type": "tool-result", "toolCallId": "c1", "result": "30 days"}],
                },
            ],
            output={"role": "assistant", "content": "You have 30 days."},
        )
    ]
    sample = extract_sample(rows)
    assert calls_of(sample) == [("search", {"q": "refund"}, "c1")]
    assert sample.tool_calls is not None and sample.tool_calls[0].result == "30 days"
    assert sample.response == "You have 30 days."


def test_unknown_payload_is_noted_not_guessed(make_row):
    rows = [make_row("g", "GENERATION", input={"prompt_template": "x", "vars": {}}, output="ok")]
    sample = extract_sample(rows)
    assert sample.response == "ok"
    assert any("not in a message format we know" in note for note in sample.notes)


def test_rows_without_io_fields_leave_calls_unknown(fixture_rows):
    """Fetched with fields=core,basic only: the generations cannot show calls, so none are claimed."""
    rows = [
        {k: v for k, v in row.items() if k not in ("input", "output")}
        for row in fixture_rows("anthropic")  # no TOOL observations in this trace
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is None
    assert sample.response is None  # the answer was not fetched: unknown, not ""
    assert any("tool calls made are unknown" in note for note in sample.notes)
    assert any("request the 'io' field group" in note for note in sample.notes)


def test_agent_stopped_after_a_tool_result_has_no_answer(make_row):
    state = {
        "messages": [
            {"type": "human", "content": "cancel my order"},
            {
                "type": "ai",
                "content": "Let me check.",
                "tool_calls": [{"name": "cancel", "args": {}, "id": "c1"}],
            },
            {"type": "tool", "content": "error: not found", "tool_call_id": "c1"},
        ]
    }
    sample = extract_sample([make_row("root", "CHAIN", output=state)])
    assert sample.response == ""


def test_message_call_without_id_pairs_with_tool_run_that_has_one(make_row):
    output = [
        {"role": "assistant", "parts": [{"type": "tool_call", "name": "lookup", "arguments": {"q": 1}}]}
    ]
    rows = [
        make_row("root", output="x"),
        make_row("g", "GENERATION", parent="root", input="go", output=output),
        make_row(
            "t",
            "TOOL",
            "lookup",
            parent="root",
            input={"q": 1},
            output="hit",
            metadata={"tool_call_id": "c9"},
        ),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None
    assert [(c.name, c.id, c.result) for c in sample.tool_calls] == [("lookup", "c9", "hit")]


def test_failed_tool_run_gets_its_error_as_result(make_row):
    rows = [
        make_row("root", output="x"),
        make_row(
            "t",
            "TOOL",
            "charge",
            parent="root",
            input={"amount": 5},
            level="ERROR",
            statusMessage="card declined",
        ),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None and sample.tool_calls[0].result == "card declined"


def test_gemini_function_call_parts_are_not_missed(make_row):
    rows = [
        make_row("root", "AGENT"),  # no output: the answer is the last assistant message
        make_row(
            "g",
            "GENERATION",
            parent="root",
            input=[{"role": "user", "parts": [{"text": "Weather in Rome?"}]}],
            output={
                "role": "model",
                "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}],
            },
        ),
        make_row(
            "g2",
            "GENERATION",
            parent="root",
            input=[
                {"role": "user", "parts": [{"text": "Weather in Rome?"}]},
                {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}],
                },
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 21}}}],
                },
            ],
            output={"role": "model", "parts": [{"text": "21°C in Rome."}]},
        ),
    ]
    sample = extract_sample(rows)
    assert calls_of(sample) == [("get_weather", {"city": "Rome"}, None)]
    assert roles_of(sample) == ["user", "assistant", "tool", "assistant"]
    assert sample.response == "21°C in Rome."


def test_execute_tool_span_name_gives_the_tool_name(make_row):
    rows = [
        make_row("root", output="x"),
        make_row("t", "TOOL", "execute_tool get_forecast", parent="root", input="{}"),
    ]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None and sample.tool_calls[0].name == "get_forecast"


@pytest.mark.parametrize("role", ["system", "user", "assistant", "human", "AI", "developer", "tool", "nobody"])
@pytest.mark.parametrize("content", ["", "text", None, ["a", {"type": "text", "text": "b"}]])
@pytest.mark.parametrize("side", ["input", "output"])
def test_a_message_of_role_and_text_reads_as_one_with_more_keys(role: str, content: Any, side: Side) -> None:
    """A role and a text alone are read without the general steps (the commonest message): the same
    messages and notes as the same message with a key nothing reads, which takes those steps."""
    plain, fuller = Notes(), Notes()
    read = MessageReader(plain).read_message({"role": role, "content": content}, side, "here")
    full = MessageReader(fuller).read_message({"role": role, "content": content, "unread": 1}, side, "here")
    assert read == full and plain.as_list() == fuller.as_list()
    by_type = MessageReader(Notes()).read_message({"type": role, "content": content}, side, "here")
    assert by_type == MessageReader(Notes()).read_message({"type": role, "content": content, "x": 1}, side, "here")

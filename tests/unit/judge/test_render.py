"""Conversation rendering: compact, tool calls with arguments, tool results cut, long traces fitted."""

from __future__ import annotations

from trace_scorer.judge.render import render_conversation, truncate
from trace_scorer.sample import Message, ToolCall


def test_roles_tool_calls_and_results() -> None:
    text = render_conversation(
        [
            Message(role="system", content="You are a travel agent."),
            Message(role="user", content="Weather in Tokyo?"),
            Message(
                role="assistant",
                content="Checking.",
                tool_calls=[ToolCall(name="get_weather", arguments={"city": "Токио"}, id="call_1")],
            ),
            Message(role="tool", content="22°C, cloudy", tool_call_id="call_1"),
            Message(role="assistant", content="It is 22°C and cloudy in Tokyo."),
        ]
    )
    assert text.splitlines() == [
        "[1] user: Weather in Tokyo?",
        "[2] assistant: Checking.",
        '    -> calls tool get_weather({"city": "Токио"}) [id call_1]',
        "[3] tool result (call call_1): 22°C, cloudy",
        "[4] assistant: It is 22°C and cloudy in Tokyo.",
    ]


def test_system_messages_only_when_asked() -> None:
    messages = [Message(role="system", content="Be brief."), Message(role="user", content="hi")]
    assert "Be brief" not in render_conversation(messages)
    assert "[1] system (agent instructions): Be brief." in render_conversation(messages, include_system=True)


def test_tool_results_are_truncated() -> None:
    long = "x" * 5000
    text = render_conversation(
        [
            Message(role="tool", content=long),
            Message(role="assistant", content="", tool_calls=[ToolCall(name="f", result={"rows": long})]),
        ],
        tool_result_max_chars=100,
    )
    assert "[truncated: 4900 more characters]" in text
    assert len(text) < 500


def test_final_answer_added_when_not_the_last_message() -> None:
    messages = [Message(role="user", content="q"), Message(role="assistant", content="a")]
    assert "[final answer]" not in render_conversation(messages, "a")
    assert render_conversation(messages, "the real answer").endswith("[final answer]: the real answer")
    assert render_conversation(messages, "").endswith("[final answer]: (empty)")
    assert render_conversation(None, "only this") == "[final answer]: only this"


def test_long_conversation_keeps_the_start_and_the_end() -> None:
    messages = [Message(role="user", content="GOAL: book a flight")]
    messages += [Message(role="assistant", content=f"step {i} " + "." * 200) for i in range(200)]
    messages += [Message(role="assistant", content="OUTCOME: booked AF123")]
    text = render_conversation(messages, max_chars=5000)
    assert len(text) <= 5000
    assert text.startswith("[1] user: GOAL: book a flight")
    assert text.endswith("OUTCOME: booked AF123")
    assert "messages left out to fit the judge's context" in text


def test_a_single_huge_last_message_is_cut() -> None:
    messages = [Message(role="user", content="q"), Message(role="assistant", content="y" * 50_000)]
    text = render_conversation(messages, max_chars=3000)
    assert len(text) <= 3000 and text.startswith("[1] user: q")


def test_truncate() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcdef", 3) == "abc… [truncated: 3 more characters]"

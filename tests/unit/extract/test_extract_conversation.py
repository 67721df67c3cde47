"""History de-duplication: each generation repeats the history; the conversation holds it once."""

from __future__ import annotations

from typing import Any

from trace_scorer.extract import extract_sample
from trace_scorer.extract.conversation import Conversation
from trace_scorer.extract.model import Msg


def m(role: str, content: str) -> Msg:
    return Msg(role=role, content=content)  # type: ignore[arg-type]


def texts(conversation: Conversation) -> list[str]:
    return [message.content for message in conversation.messages]


def test_history_repeated_by_each_generation_appears_once():
    conversation = Conversation()
    conversation.extend([m("system", "S"), m("user", "hi"), m("assistant", "a1")])
    conversation.extend(
        [m("system", "S"), m("user", "hi"), m("assistant", "a1"), m("user", "more"), m("assistant", "a2")]
    )
    assert texts(conversation) == ["S", "hi", "a1", "more", "a2"]


def test_a_message_said_again_later_is_kept():
    conversation = Conversation()
    conversation.extend([m("user", "yes"), m("assistant", "Sure?")])
    conversation.extend(
        [m("user", "yes"), m("assistant", "Sure?"), m("user", "yes"), m("assistant", "Done.")]
    )
    assert texts(conversation) == ["yes", "Sure?", "yes", "Done."]


def test_refreshed_system_prompt_is_not_appended_again():
    conversation = Conversation()
    conversation.extend([m("system", "Now: 10:00"), m("user", "hi"), m("assistant", "a1")])
    conversation.extend(
        [
            m("system", "Now: 10:01"),
            m("user", "hi"),
            m("assistant", "a1"),
            m("user", "q2"),
            m("assistant", "a2"),
        ]
    )
    assert texts(conversation) == ["Now: 10:00", "hi", "a1", "q2", "a2"]


def test_windowed_history_keeps_order_without_duplicates():
    conversation = Conversation()
    conversation.extend(
        [m("system", "S"), m("user", "u1"), m("assistant", "a1"), m("user", "u2"), m("assistant", "a2")]
    )
    conversation.extend(
        [m("system", "S"), m("user", "u2"), m("assistant", "a2"), m("user", "u3"), m("assistant", "a3")]
    )
    assert texts(conversation) == ["S", "u1", "a1", "u2", "a2", "u3", "a3"]


def test_sub_agent_with_its_own_prompt_is_appended_whole():
    conversation = Conversation()
    conversation.extend([m("system", "Planner"), m("user", "plan a trip"), m("assistant", "delegating")])
    conversation.extend([m("system", "Researcher"), m("user", "find hotels"), m("assistant", "Hotel X")])
    assert texts(conversation) == [
        "Planner",
        "plan a trip",
        "delegating",
        "Researcher",
        "find hotels",
        "Hotel X",
    ]


def test_end_to_end_three_generations_of_one_agent(fixture_rows):
    sample = extract_sample(fixture_rows("openai_chat"))
    assert sample.messages is not None
    assert len(sample.messages) == 7  # 3 generations whose inputs hold 2, 4 and 6 messages, not 15
    contents = [(msg.role, msg.content) for msg in sample.messages]
    assert len(set(contents[:2])) == 2


def test_langchain_definitions_do_not_break_history_matching(make_row):
    """The tool definitions the handler appends sit *after* the history: the next generation's new
    messages must still be found (they come after the last known message)."""
    definition: dict[str, Any] = {"role": "tool", "content": {"type": "function", "function": {"name": "f"}}}
    call = {"name": "f", "args": {"x": 1}, "id": "c1", "type": "tool_call"}
    ai = {"role": "assistant", "content": "", "tool_calls": [call]}
    rows = [
        make_row("root", "CHAIN", output="answer"),
        make_row(
            "g1", "GENERATION", parent="root", input=[{"role": "user", "content": "q"}, definition], output=ai
        ),
        make_row(
            "g2",
            "GENERATION",
            parent="root",
            input=[
                {"role": "user", "content": "q"},
                ai,
                {"role": "tool", "content": "r", "tool_call_id": "c1"},
                definition,
            ],
            output={"role": "assistant", "content": "answer"},
        ),
    ]
    sample = extract_sample(rows)
    assert sample.messages is not None
    assert [(msg.role, msg.content) for msg in sample.messages] == [
        ("user", "q"),
        ("assistant", ""),
        ("tool", "r"),
        ("assistant", "answer"),
    ]

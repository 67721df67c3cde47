"""A session's traces → one Sample (``extract_session``): the whole conversation, turn after turn."""

from __future__ import annotations

from typing import Any

from tests.unit.extract.conftest import RowMaker
from trace_scorer.extract import extract_sample, extract_session

SYSTEM = {"role": "system", "content": "You are a weather bot."}
ROME = '{"city": "Rome"}'


def call(ident: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat(make_row: RowMaker) -> list[dict[str, Any]]:
    """Two turns of a chat app, one trace each; the second turn's generation repeats the first turn."""
    turn1 = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    turn2_question = {"role": "user", "content": "And in Rome?"}
    rows = [
        make_row("r1", "AGENT", "chat", input={"q": "Weather in Paris?"}, output="Sunny in Paris.", at=1, trace="t1"),
        make_row(
            "g1a",
            "GENERATION",
            parent="r1",
            input=[SYSTEM, turn1[0]],
            output=turn1[1],
            at=2,
            trace="t1",
            usage={"total": 10},
        ),
        make_row("g1b", "GENERATION", parent="r1", input=[SYSTEM, *turn1], output="Sunny in Paris.", at=3, trace="t1"),
        make_row("r2", "AGENT", "chat", input={"q": "And in Rome?"}, output="Rainy in Rome.", at=20, trace="t2"),
        make_row(
            "g2",
            "GENERATION",
            parent="r2",
            input=[SYSTEM, *turn1, {"role": "assistant", "content": "Sunny in Paris."}, turn2_question],
            output={"role": "assistant", "content": None, "tool_calls": [call("c2", "get_weather", ROME)]},
            at=21,
            trace="t2",
            usage={"total": 5},
        ),
        make_row("g2b", "GENERATION", parent="r2", input=[turn2_question], output="Rainy in Rome.", at=22, trace="t2"),
    ]
    for row in rows:
        row["sessionId"] = "chat-1"
    return rows


def test_the_conversation_runs_across_turns_each_message_once(make_row: RowMaker) -> None:
    sample = extract_session(chat(make_row), session_id="chat-1")
    assert sample.id == "chat-1"
    assert sample.messages is not None
    said = [(m.role, m.content) for m in sample.messages]
    assert said.count(("user", "Weather in Paris?")) == 1
    assert said.count(("system", "You are a weather bot.")) == 1
    assert said.index(("user", "Weather in Paris?")) < said.index(("user", "And in Rome?"))
    assert said[-1] == ("assistant", "Rainy in Rome.")


def test_tool_calls_of_every_turn_counted_once_and_the_last_answer_is_the_response(make_row: RowMaker) -> None:
    sample = extract_session(chat(make_row), session_id="chat-1")
    assert sample.tool_calls is not None
    assert [(c.name, c.arguments) for c in sample.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Rome"}),
    ]
    assert sample.response == "Rainy in Rome."


def test_facts_are_the_sessions_totals(make_row: RowMaker) -> None:
    rows = chat(make_row)
    sample = extract_session(rows, session_id="chat-1")
    assert sample.total_tokens == 15
    # Each turn's root lasts half a second (the conftest's rows): the time between turns is not counted.
    assert sample.latency == 1.0
    assert sample.start_time is not None and sample.start_time.second == 1
    one = extract_sample([r for r in rows if r["traceId"] == "t1"], trace_id="t1")
    assert one.latency == 0.5 and one.total_tokens == 10


def test_order_is_by_start_whatever_order_the_rows_come_in(make_row: RowMaker) -> None:
    rows = chat(make_row)
    assert extract_session(list(reversed(rows)), session_id="chat-1").response == "Rainy in Rome."


def test_turns_without_generations_are_each_roots_question_and_answer(make_row: RowMaker) -> None:
    rows = [
        make_row("a", "SPAN", input="hello", output="hi!", at=1, trace="t1"),
        make_row("b", "SPAN", input="bye", output="see you", at=5, trace="t2"),
    ]
    sample = extract_session(rows, session_id="s")
    assert sample.messages is not None
    assert [(m.role, m.content) for m in sample.messages] == [
        ("user", "hello"),
        ("assistant", "hi!"),
        ("user", "bye"),
        ("assistant", "see you"),
    ]
    assert sample.response == "see you"


def test_references_are_read_from_the_last_turn_as_for_a_trace(make_row: RowMaker) -> None:
    from trace_scorer.config.references import ReferenceSettings

    rows = chat(make_row)
    rows[3]["metadata"] = {"expected": "Rainy in Rome."}
    sample = extract_session(
        rows, session_id="chat-1", references=ReferenceSettings(expected="$.trace.metadata.expected")
    )
    assert sample.expected == "Rainy in Rome."


def test_no_rows_is_an_empty_sample_with_a_note() -> None:
    sample = extract_session([], session_id="s")
    assert sample.id == "s" and sample.messages is None and sample.notes


def test_the_reference_free_checks_score_a_session_as_they_score_a_trace(make_row: RowMaker) -> None:
    import asyncio

    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.metrics.base import Score
    from trace_scorer.scoring.pipeline import Pipeline
    from trace_scorer.scoring.plan import build_plan

    checks = ["tool_call_validity", "tool_errors", "tool_loops", "answer_completeness", "latency", "total_tokens"]
    checks += ["tool_call_count"]
    target = TargetSettings.model_validate({"name": "s", "metrics": [{"metric": m} for m in checks]})
    pipeline = Pipeline(build_plan(target))
    result = asyncio.run(pipeline.score_sample(extract_session(chat(make_row), session_id="chat-1")))
    values = {name: o.value for name, o in result.outcomes.items() if isinstance(o, Score)}
    assert values["tool_call_count"] == 2  # one call a turn, the first turn's not counted again in the second
    assert values["tool_loops"] == 0  # Paris then Rome: not a repeat
    assert values["answer_completeness"] == 1  # the last turn's answer
    assert values["total_tokens"] == 15 and values["latency"] == 1.0
    assert "tool_errors" in values
    # No turn declared its tools: validity cannot be judged (skipped with a reason, not scored on a guess).
    assert "tool_call_validity" not in values


def test_judge_variables_read_the_session_document(make_row: RowMaker) -> None:
    """``$.session``: the session's id and its turns in order, each a trace as ``$.trace`` shows it;
    ``$.trace`` is the last turn."""
    from trace_scorer.config.references import ReferenceSettings

    paths = [
        "$.session.id",
        "$.session.turns[-1].input.q",
        "$.session.turns[0].output",
        "$.session.turns[0].id",
        "$.session.turns",
        "$.trace.input.q",
    ]
    sample = extract_session(chat(make_row), session_id="chat-9", references=ReferenceSettings(variables=paths))
    found = sample.variables
    assert found["$.session.id"] == "chat-9"
    assert found["$.session.turns[-1].input.q"] == "And in Rome?"
    assert found["$.session.turns[0].output"] == "Sunny in Paris."
    assert found["$.session.turns[0].id"] == "t1"
    assert [turn["id"] for turn in found["$.session.turns"]] == ["t1", "t2"]
    assert found["$.trace.input.q"] == "And in Rome?"


def test_a_trace_sample_has_no_session_document(make_row: RowMaker) -> None:
    from trace_scorer.config.references import ReferenceSettings

    rows = [r for r in chat(make_row) if r["traceId"] == "t1"]
    sample = extract_sample(rows, references=ReferenceSettings(variables=["$.session.id"]), trace_id="t1")
    assert "$.session.id" not in sample.variables

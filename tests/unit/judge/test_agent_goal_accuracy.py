"""AgentGoalAccuracy: both modes, auto, the number of calls, the verdict arithmetic."""

from __future__ import annotations

import json

import pytest

from tests.support.judge import JudgeFactory, ScriptedLLM, booking_sample, make_metric, provider, verdict
from trace_scorer.metrics.agent_goal_accuracy import AgentGoalAccuracy
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.sample import Message, Sample

REFERENCE = "Successfully book a flight to Paris for the user"


def inference(goal: str = "book a flight to Paris on Monday", end: str = "flight AF12345 booked") -> str:
    return json.dumps({"user_goal": goal, "end_state": end})


async def test_with_reference_one_call_per_model_mean_of_verdicts(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("a", verdict(1, "Booked with confirmation AF12345."))
    llm.on("b", verdict(1, "The flight was booked."))
    llm.on("c", verdict(0, "No payment confirmed."))
    judge = await make_judge(provider("p", "a", "b", "c"))
    metric = make_metric(AgentGoalAccuracy, judge, mode="with_reference")

    outcome = await metric.score(booking_sample(reference=REFERENCE), {})

    assert isinstance(outcome, Score)
    assert outcome.value == pytest.approx(2 / 3)
    assert len(llm.requests) == 3  # one per model
    for body in llm.requests:
        user = ScriptedLLM.user_text(body)
        assert "<<<BEGIN REFERENCE GOAL" in user and REFERENCE in user
        assert "Confirmation AF12345" in user
    assert outcome.details["mode"] == "with_reference"
    assert outcome.details["models"]["p/c"]["verdict"] == "not reached"
    assert outcome.comment.startswith("2/3 models: goal reached — Booked with confirmation AF12345.")
    assert "[a: reached, b: reached, c: not reached]" in outcome.comment


async def test_without_reference_two_calls_per_model(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", inference(), verdict(1, "end state matches the goal"))
    llm.on("b", inference(end="flight only searched"), verdict(0, "nothing booked"))
    judge = await make_judge(provider("p", "a", "b"))
    metric = make_metric(AgentGoalAccuracy, judge, mode="without_reference")

    outcome = await metric.score(booking_sample(reference=REFERENCE), {})

    assert isinstance(outcome, Score)
    assert outcome.value == 0.5
    for model in ("a", "b"):
        first, second = llm.for_model(model)
        assert first["response_format"]["json_schema"]["name"] == "GoalInference"
        assert second["response_format"]["json_schema"]["name"] == "GoalVerdict"
        # the second call judges the inferred goal and end state, not the reference
        assert "<<<BEGIN USER GOAL" in ScriptedLLM.user_text(second)
        assert REFERENCE not in ScriptedLLM.user_text(second)
    assert "flight only searched" in ScriptedLLM.user_text(llm.for_model("b")[1])
    assert outcome.details["models"]["p/a"]["user_goal"] == "book a flight to Paris on Monday"
    assert outcome.details["models"]["p/b"]["end_state"] == "flight only searched"
    assert outcome.details["calls"] == 4


@pytest.mark.parametrize(
    ("reference", "expected_mode", "calls"),
    [(REFERENCE, "with_reference", 1), (None, "without_reference", 2), ("  ", "without_reference", 2)],
)
async def test_auto_mode_uses_the_reference_when_there_is_one(
    llm: ScriptedLLM, make_judge: JudgeFactory, reference: str | None, expected_mode: str, calls: int
) -> None:
    def answer(body: dict[str, object]) -> str:
        name = body["response_format"]["json_schema"]["name"]  # type: ignore[index]
        return inference() if name == "GoalInference" else verdict(1)

    llm.on("a", answer)
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(AgentGoalAccuracy, judge).score(booking_sample(reference=reference), {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    assert outcome.details["mode"] == expected_mode
    assert len(llm.requests) == calls


async def test_with_reference_mode_skips_without_reference(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(AgentGoalAccuracy, judge, mode="with_reference").score(booking_sample(), {})
    assert isinstance(outcome, Skipped) and "reference" in outcome.reason
    assert llm.requests == []


async def test_empty_conversation_is_skipped(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(AgentGoalAccuracy, judge).score(Sample(id="x", messages=[]), {})
    assert isinstance(outcome, Skipped)
    assert llm.requests == []


async def test_russian_conversation_with_russian_prompts(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", verdict(1, "Рейс забронирован, есть номер подтверждения."))
    judge = await make_judge(provider("p", "a"), language="ru")
    sample = Sample(
        id="ru",
        messages=[
            Message(role="user", content="Какая погода в Токио?"),
            Message(role="assistant", content="В Токио 22°C, переменная облачность."),
        ],
        reference="Сообщить пользователю погоду в Токио",
    )
    outcome = await make_metric(AgentGoalAccuracy, judge).score(sample, {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    system = llm.requests[0]["messages"][0]["content"]
    user = ScriptedLLM.user_text(llm.requests[0])
    assert "недоверенной трассы" in system and "на русском языке" in system
    assert user.startswith("Задача: определить, достиг ли ИИ-агент цели пользователя")
    assert "<<<BEGIN ДИАЛОГ" in user and "<<<BEGIN ЭТАЛОННАЯ ЦЕЛЬ" in user
    assert "Ответь в таком формате JSON" in user
    assert outcome.details["language"] == "ru"
    assert "Рейс забронирован" in outcome.comment

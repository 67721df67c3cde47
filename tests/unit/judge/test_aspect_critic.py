"""AspectCritic: the seed's strictness arithmetic, vote sampling, inputs, options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.support.judge import JudgeFactory, ScriptedLLM, booking_sample, make_metric, provider, verdict
from trace_scorer.metrics.aspect_critic import AspectCritic, majority
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.sample import Sample

A = "openrouter/model-a"
B = "openrouter/model-b"


async def test_seed_strictness_example(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    """Seed 003: model A votes [PASS, PASS, FAIL] → 1, model B [FAIL, FAIL, PASS] → 0, value 0.5."""
    llm.on("model-a", verdict(1, "has a date"), verdict(1, "has a date"), verdict(0, "no date"))
    llm.on("model-b", verdict(0, "no year"), verdict(0, "no year"), verdict(1, "1889"))
    judge = await make_judge(provider("openrouter", "model-a", "model-b"))
    metric = make_metric(
        AspectCritic, judge, "has_date", definition="The answer contains a date", strictness=3
    )

    outcome = await metric.score(booking_sample(), {})

    assert isinstance(outcome, Score)
    assert outcome.value == 0.5
    models = outcome.details["models"]
    assert models[A]["votes"] == ["PASS", "PASS", "FAIL"] and models[A]["value"] == 1.0
    assert models[B]["votes"] == ["FAIL", "FAIL", "PASS"] and models[B]["value"] == 0.0
    assert models[A]["reasoning"] == "has a date" and models[B]["reasoning"] == "no year"
    # three samples per model, drawn at the sampling temperature, never one answer replayed
    assert len(llm.for_model("model-a")) == 3 and len(llm.for_model("model-b")) == 3
    assert {r["temperature"] for r in llm.requests} == {0.7}
    assert outcome.comment.startswith("1/2 models: meets the criterion — has a date")
    assert "model-a: pass" in outcome.comment and "model-b: fail" in outcome.comment


async def test_five_models_two_pass_is_040(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    """Seed 003 aggregation: 2 PASS + 3 FAIL over five models = 0.40."""
    names = [f"m{i}" for i in range(5)]
    for i, name in enumerate(names):
        llm.on(name, verdict(1 if i < 2 else 0))
    judge = await make_judge(provider("p", *names))
    outcome = await make_metric(AspectCritic, judge, definition="Is concise").score(booking_sample(), {})
    assert isinstance(outcome, Score)
    assert outcome.value == pytest.approx(0.4)
    assert outcome.comment.startswith("3/5 models: does not meet the criterion")


async def test_strictness_one_uses_the_judge_temperature(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("model-a", verdict(1))
    judge = await make_judge(provider("openrouter", "model-a"), temperature=0.0)
    outcome = await make_metric(AspectCritic, judge, definition="Polite").score(booking_sample(), {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    assert [r["temperature"] for r in llm.requests] == [0.0]
    assert [r["max_tokens"] for r in llm.requests] == [1000]
    assert "votes" not in outcome.details["models"][A]
    assert outcome.comment == "1/1 model: meets the criterion — because"


async def test_definition_is_in_the_instructions_not_the_data(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("model-a", verdict(1))
    judge = await make_judge(provider("openrouter", "model-a"))
    await make_metric(AspectCritic, judge, definition="No harmful content").score(booking_sample(), {})
    user = ScriptedLLM.user_text(llm.requests[0])
    assert user.index("No harmful content") < user.index("<<<BEGIN CONVERSATION")


async def test_response_only_sample_is_judged_on_the_response(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("model-a", verdict(0))
    judge = await make_judge(provider("openrouter", "model-a"))
    sample = Sample(id="r", response="The Eiffel Tower is in Paris and very tall.")
    outcome = await make_metric(AspectCritic, judge, definition="Contains a year").score(sample, {})
    assert isinstance(outcome, Score) and outcome.value == 0.0
    user = ScriptedLLM.user_text(llm.requests[0])
    assert "<<<BEGIN RESPONSE" in user and "very tall" in user and "CONVERSATION" not in user


async def test_nothing_to_judge_is_skipped(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    judge = await make_judge(provider("openrouter", "model-a"))
    outcome = await make_metric(AspectCritic, judge, definition="x").score(Sample(id="e"), {})
    assert isinstance(outcome, Skipped)
    assert llm.requests == []


def test_majority() -> None:
    assert majority([1, 1, 0]) == 1
    assert majority([0, 0, 1]) == 0
    assert majority([1]) == 1


@pytest.mark.parametrize(
    "options",
    [{"definition": "x", "strictness": 2}, {"definition": "  "}, {"definition": "x", "strictness": 11}, {}],
)
def test_bad_options_are_rejected(options: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        AspectCritic.Options(**options)


def test_a_boolean_is_no_strictness() -> None:
    """``strictness = true`` would be read as 1 by pydantic: refused, naming the key."""
    with pytest.raises(ValidationError, match="strictness: expected a number, not true"):
        AspectCritic.Options.model_validate({"definition": "x", "strictness": True})

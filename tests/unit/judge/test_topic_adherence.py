"""TopicAdherence: precision / recall / F1 arithmetic, mean over models, where reference topics come from."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.judge import JudgeFactory, ScriptedLLM, make_metric, provider
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.metrics.topic_adherence import TopicAdherence
from trace_scorer.sample import Message, Sample

REFERENCE = ["machine learning", "artificial intelligence", "supervised learning", "unsupervised learning"]


def topics_answer(topics: dict[str, bool], covered: dict[str, bool]) -> str:
    return json.dumps(
        {
            "topics": [{"topic": t, "on_topic": on} for t, on in topics.items()],
            "reference_topics": [{"topic": t, "covered": c} for t, c in covered.items()],
        }
    )


def ml_sample(**fields: Any) -> Sample:
    values: dict[str, Any] = {
        "id": "ml",
        "messages": [
            Message(role="user", content="Tell me about machine learning"),
            Message(
                role="assistant",
                content="ML lets systems learn from data. By the way, did you see the match?",
            ),
            Message(role="user", content="What about football?"),
            Message(role="assistant", content="The final was 3-2!"),
        ],
        "reference_topics": REFERENCE,
    }
    values.update(fields)
    return Sample(**values)


# 4 topics extracted, 3 on-topic → P = 0.75; 2 of 4 reference topics covered → R = 0.5; F1 = 0.6
ANSWER_A = topics_answer(
    {"machine learning": True, "learning from data": True, "AI": True, "football": False},
    {
        "machine learning": True,
        "artificial intelligence": True,
        "supervised learning": False,
        "unsupervised learning": False,
    },
)
# 2 topics, 1 on-topic → P = 0.5; 1 of 4 covered → R = 0.25; F1 = 1/3
ANSWER_B = topics_answer(
    {"machine learning": True, "football": False},
    {t: t == "machine learning" for t in REFERENCE},
)


@pytest.mark.parametrize(
    ("mode", "value_a", "value_b"),
    [("precision", 0.75, 0.5), ("recall", 0.5, 0.25), ("f1", 0.6, 1 / 3)],
)
async def test_modes_and_mean_over_models(
    llm: ScriptedLLM, make_judge: JudgeFactory, mode: str, value_a: float, value_b: float
) -> None:
    llm.on("a", ANSWER_A)
    llm.on("b", ANSWER_B)
    judge = await make_judge(provider("p", "a", "b"))
    outcome = await make_metric(TopicAdherence, judge, mode=mode).score(ml_sample(), {})

    assert isinstance(outcome, Score)
    assert outcome.value == pytest.approx((value_a + value_b) / 2)
    a, b = outcome.details["models"]["p/a"], outcome.details["models"]["p/b"]
    assert (a["precision"], a["recall"], a["f1"]) == pytest.approx((0.75, 0.5, 0.6))
    assert (b["precision"], b["recall"], b["f1"]) == pytest.approx((0.5, 0.25, 1 / 3))
    assert outcome.details["f1"] == pytest.approx((0.6 + 1 / 3) / 2)
    assert len(llm.requests) == 2  # one call per model does both jobs
    assert outcome.comment.startswith(f"{mode} {outcome.value:.2f} (mean of 2 models)")
    assert "off-topic: football" in outcome.comment
    assert "not covered: supervised learning, unsupervised learning" in outcome.comment


async def test_reference_topics_are_data_in_the_prompt(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", ANSWER_A)
    judge = await make_judge(provider("p", "a"))
    await make_metric(TopicAdherence, judge).score(ml_sample(), {})
    user = ScriptedLLM.user_text(llm.requests[0])
    block = user.split("<<<BEGIN REFERENCE TOPICS", 1)[1].split("<<<END REFERENCE TOPICS", 1)[0]
    assert "- supervised learning" in block and "- unsupervised learning" in block


async def test_fixed_list_from_options_and_sample_precedence(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("a", topics_answer({"flights": True}, {"flights": True}))
    judge = await make_judge(provider("p", "a"))
    metric = make_metric(TopicAdherence, judge, reference_topics=["flights"])

    from_options = await metric.score(ml_sample(reference_topics=None), {})
    assert isinstance(from_options, Score) and from_options.value == 1.0
    assert from_options.details["reference_topics"] == ["flights"]

    llm.on("a", ANSWER_A)
    from_sample = await metric.score(ml_sample(id="other"), {})
    assert isinstance(from_sample, Score)
    assert from_sample.details["reference_topics"] == REFERENCE


@pytest.mark.parametrize("reference", [None, []])
async def test_absent_or_empty_reference_topics_skip(
    llm: ScriptedLLM, make_judge: JudgeFactory, reference: Any
) -> None:
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(TopicAdherence, judge).score(ml_sample(reference_topics=reference), {})
    assert isinstance(outcome, Skipped) and "reference_topics" in outcome.reason
    assert llm.requests == []


async def test_no_topics_extracted_is_skipped(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", topics_answer({}, {t: False for t in REFERENCE}))
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(TopicAdherence, judge).score(ml_sample(), {})
    assert isinstance(outcome, Skipped) and outcome.reason == "no topics extracted from the conversation"


async def test_one_model_without_topics_is_left_out_of_the_mean(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("a", ANSWER_A)
    llm.on("b", topics_answer({}, {t: False for t in REFERENCE}))
    judge = await make_judge(provider("p", "a", "b"))
    outcome = await make_metric(TopicAdherence, judge).score(ml_sample(), {})
    assert isinstance(outcome, Score) and outcome.value == pytest.approx(0.6)
    assert outcome.details["models"]["p/b"]["verdict"] == "no topics"


async def test_answer_missing_a_reference_topic_is_asked_again(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    incomplete = topics_answer({"machine learning": True}, {"machine learning": True})
    # the retry answer spells topics differently in case and spacing: still the same topics
    complete = topics_answer({"machine learning": True}, {t.upper() + " ": True for t in REFERENCE})
    llm.on("a", incomplete, complete)
    judge = await make_judge(provider("p", "a"))
    outcome = await make_metric(TopicAdherence, judge).score(ml_sample(), {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    retry = llm.requests[1]["messages"][-1]["content"]
    assert "reference_topics lacks" in retry and "unsupervised learning" in retry

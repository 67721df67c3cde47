"""pass@k / pass^k through the pipeline, with correctness from embedding similarity and from another metric,
at the threshold's edges."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.embeddings import ScriptedEmbedder
from trace_scorer.config import TargetSettings
from trace_scorer.metrics.base import Resources, Score
from trace_scorer.sample import Sample, ToolCall
from trace_scorer.scoring.pipeline import GroupResult, Pipeline
from trace_scorer.scoring.plan import build_plan

#: Vectors whose cosine with the expected answer's is known exactly: 20 / (5 · 5) is 0.8 in floating point.
VECTORS = {
    "expected": [5.0, 0.0],
    "right": [1.0, 0.0],  # cosine 1.0
    "at the edge": [4.0, 3.0],  # cosine 0.8 exactly
    "just below": [4.0, 3.0001],  # cosine 0.79999…
    "wrong": [0.0, 1.0],  # cosine 0.0
}


async def run(metrics: list[dict[str, Any]], attempts: dict[str, list[Sample]], embedder: Any = None) -> GroupResult:
    target = TargetSettings.model_validate({"name": "t", "group_by": "*", "metrics": metrics})
    pipeline = Pipeline(build_plan(target, resources=Resources(embedder=embedder)))
    results = [await pipeline.score_sample(s) for samples in attempts.values() for s in samples]
    return await pipeline.score_group("all", results)


def similarity_attempts() -> dict[str, list[Sample]]:
    answers = {
        "q1": ["right", "at the edge", "just below", "wrong", "wrong"],  # n = 5
        "q2": ["at the edge", "at the edge", "at the edge"],  # n = 3: left out for k = 5
    }
    return {
        item: [Sample(id=f"{item}-{i}", item_id=item, response=r, expected="expected") for i, r in enumerate(rs)]
        for item, rs in answers.items()
    }


@pytest.mark.parametrize(
    ("threshold", "direction", "c1", "c2"),
    [
        (0.8, ">=", 2, 3),  # a cosine of exactly 0.8 is correct at the default threshold…
        (0.8, ">", 1, 0),  # …and not with a strict comparison
        (0.79, ">=", 3, 3),  # 0.79999 passes a slightly lower threshold
        (1.0, ">=", 1, 0),  # only the identical direction
    ],
)
async def test_similarity_threshold_edges(threshold: float, direction: str, c1: int, c2: int) -> None:
    group = await run(
        [
            {"metric": "answer_similarity"},
            {"metric": "pass_at_k", "k": [1, 2, 5], "threshold": threshold, "direction": direction},
        ],
        similarity_attempts(),
        ScriptedEmbedder(VECTORS),
    )
    values = group.values(kpis=False)
    pass_at_2 = {0: 0.0, 1: 0.4, 2: 0.7, 3: 0.9}  # 1 − C(5−c, 2)/C(5, 2) for q1
    pass_hat_2 = {0: 0.0, 1: 0.0, 2: 0.1, 3: 0.3}  # C(c, 2)/C(5, 2) for q1
    q2_at_2, q2_hat_2 = (1.0, 1.0) if c2 == 3 else (0.0, 0.0)
    assert values["pass_at_1"] == pytest.approx((c1 / 5 + c2 / 3) / 2)
    assert values["pass_hat_1"] == pytest.approx(values["pass_at_1"])  # k = 1: both are c/n
    assert values["pass_at_2"] == pytest.approx((pass_at_2[c1] + q2_at_2) / 2)
    assert values["pass_hat_2"] == pytest.approx((pass_hat_2[c1] + q2_hat_2) / 2)
    assert values["pass_at_5"] == (1.0 if c1 else 0.0)  # k = n: any()
    assert values["pass_hat_5"] == 0.0  # k = n: all()
    at5 = group.outcomes["pass_at_5"]
    assert isinstance(at5, Score)
    assert at5.details["items"] == 1 and at5.details["items_with_fewer_than_k_attempts"] == 1
    assert at5.details["attempts"] == {"q1": {"n": 5, "correct": c1}}
    assert at5.details["correct_when"] == f"answer_similarity {direction} {threshold:g}"


async def test_normalisation_can_decide_correctness() -> None:
    """The same attempts, correct only once case and punctuation no longer count."""
    vectors = {"paris": [1.0, 0.0], "Paris!": [0.6, 0.8], "PARIS.": [0.6, 0.8]}
    attempts = {
        "q": [Sample(id=f"q{i}", item_id="q", response=r, expected="paris") for i, r in enumerate(["Paris!", "PARIS."])]
    }
    metrics = [{"metric": "pass_at_k", "k": [1]}]
    raw = await run([{"metric": "answer_similarity"}, *metrics], attempts, ScriptedEmbedder(vectors))
    normalized = await run(
        [{"metric": "answer_similarity", "normalize": True}, *metrics], attempts, ScriptedEmbedder(vectors)
    )
    assert raw.values(kpis=False)["pass_at_1"] == 0.0
    assert normalized.values(kpis=False)["pass_at_1"] == 1.0


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


@pytest.mark.parametrize(("threshold", "correct"), [(1.0, 2), (0.6, 3), (0.0, 4)])
async def test_metric_based_correctness_reuses_the_computed_score(threshold: float, correct: int) -> None:
    """``correct_when = "tool_call_accuracy"``: no embedder needed; the per-trace F1 decides."""
    reference = [call("book_flight", flight="AF123")]
    made = [
        [call("book_flight", flight="AF123")],  # F1 1.0
        [call("book_flight", flight="AF123"), call("book_flight", flight="AF123")],  # F1 0.6667
        [],  # F1 0.0
        [call("book_flight", flight="AF123")],  # F1 1.0
    ]
    attempts = {
        "book": [
            Sample(id=f"b{i}", item_id="book", tool_calls=calls, reference_tool_calls=reference)
            for i, calls in enumerate(made)
        ]
    }
    group = await run(
        [
            {"metric": "tool_call_accuracy"},
            {"metric": "pass_at_k", "k": [1, 2, 4], "correct_when": "tool_call_accuracy", "threshold": threshold},
        ],
        attempts,
    )
    values = group.values(kpis=False)
    assert values["pass_at_1"] == pytest.approx(correct / 4)
    assert values["pass_hat_2"] == pytest.approx(correct * (correct - 1) / 12)  # C(c, 2)/C(4, 2)
    assert values["pass_at_4"] == 1.0 and values["pass_hat_4"] == (1.0 if correct == 4 else 0.0)

"""pass@k and pass^k: the estimators against hand-computed values, and the group metric."""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_scorer.config import TargetSettings
from trace_scorer.metrics.base import GroupInput, Score, Skipped
from trace_scorer.metrics.pass_at_k import PassAtK, PassAtKOptions, pass_at_k, pass_hat_k
from trace_scorer.metrics.registry import MetricRegistry
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (5, 3, 2, 0.9, 0.3),  # docs/metrics.md's example: 1 − C(2,2)/C(5,2) = 0.9; C(3,2)/C(5,2) = 0.3
        (5, 3, 1, 0.6, 0.6),  # k = 1: both are c/n
        (5, 0, 3, 0.0, 0.0),  # c = 0
        (5, 5, 3, 1.0, 1.0),  # c = n
        (5, 3, 5, 1.0, 0.0),  # k = n: any() and all()
        (4, 1, 2, 0.5, 0.0),  # 1 − C(3,2)/C(4,2) = 1 − 3/6
        (10, 2, 3, 1 - math.comb(8, 3) / math.comb(10, 3), 0.0),
    ],
)
def test_estimators_hand_computed(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at)
    assert pass_hat_k(n, c, k) == pytest.approx(hat)


@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_estimators_equal_the_average_over_all_draws(args: tuple[int, int, int]) -> None:
    n, c, k = args
    outcomes = [True] * c + [False] * (n - c)
    draws = list(combinations(outcomes, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws))
    assert pass_hat_k(n, c, k) == pytest.approx(sum(all(d) for d in draws) / len(draws))


def test_large_n_stays_stable() -> None:
    # C(1000, 500) overflows a float; the product form does not.
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)
    assert pass_hat_k(1000, 999, 500) == pytest.approx(0.5)


def test_n_smaller_than_k_is_an_error_for_the_estimator() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def attempts(*items: tuple[str, list[float]]) -> GroupInput:
    samples, results = [], []
    for item, values in items:
        for index, value in enumerate(values):
            samples.append(Sample(id=f"{item}-{index}", item_id=item))
            results.append({"answer_similarity": Score(value)})
    return GroupInput("dataset", samples, results)


async def test_group_metric_means_over_items_and_counts_short_items() -> None:
    metric = PassAtK("pass_at_k", PassAtKOptions(k=[1, 2, 5]))
    group = attempts(
        ("q1", [0.9, 0.95, 0.1, 0.85, 0.2]),  # n=5, c=3
        ("q2", [0.1, 0.3, 0.5, 0.79, 0.0]),  # n=5, c=0 (0.79 < 0.8)
        ("q3", [0.8, 0.99]),  # n=2, c=2: left out for k=5
    )
    out = await metric.score_group(group)
    assert isinstance(out, dict)
    at2, hat2, at5 = out["pass_at_2"], out["pass_hat_2"], out["pass_at_5"]
    assert isinstance(at2, Score) and at2.value == pytest.approx((0.9 + 0.0 + 1.0) / 3)
    assert isinstance(hat2, Score) and hat2.value == pytest.approx((0.3 + 0.0 + 1.0) / 3)
    assert isinstance(at5, Score) and at5.value == pytest.approx(0.5)
    assert at5.details["items_with_fewer_than_k_attempts"] == 1
    assert "1 with fewer than 5 attempts left out" in at5.comment
    assert at2.details["attempts"]["q1"] == {"n": 5, "correct": 3}


async def test_threshold_edge_and_direction() -> None:
    group = attempts(("q", [0.8, 0.7999]))
    at_least = await PassAtK("p", PassAtKOptions(k=[2], threshold=0.8)).score_group(group)
    above = await PassAtK("p", PassAtKOptions(k=[2], threshold=0.8, direction=">")).score_group(group)
    assert isinstance(at_least, dict) and isinstance(above, dict)
    assert isinstance(at_least["pass_at_2"], Score) and at_least["pass_at_2"].value == 1.0
    assert isinstance(above["pass_at_2"], Score) and above["pass_at_2"].value == 0.0


async def test_every_item_short_is_a_skip_not_a_zero() -> None:
    out = await PassAtK("p", PassAtKOptions(k=[3])).score_group(attempts(("q", [0.9, 0.9])))
    assert isinstance(out, dict)
    assert out["pass_at_3"] == Skipped("no question has 3 attempts (most: 2)")


async def test_samples_without_correctness_are_not_attempts() -> None:
    group = GroupInput(
        "g",
        [Sample(id="a", item_id="q"), Sample(id="b", item_id="q"), Sample(id="c")],
        [{"answer_similarity": Score(0.9)}, {"answer_similarity": Skipped("expected absent")}, {}],
    )
    out = await PassAtK("p", PassAtKOptions(k=[1])).score_group(group)
    assert isinstance(out, dict) and isinstance(out["pass_at_1"], Score)
    assert out["pass_at_1"].details["samples_without_correctness"] == 2
    assert out["pass_at_1"].details["attempts"] == {"q": {"n": 1, "correct": 1}}


@pytest.mark.parametrize("bad", [{"k": [0]}, {"k": [2, 2]}, {"k": []}, {"threshold": 1.5}])
def test_option_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PassAtKOptions.model_validate(bad)


async def test_metric_based_correctness_through_the_pipeline(toy_registry: MetricRegistry) -> None:
    """Correctness from another metric already computed on each trace (here the toy metadata value)."""
    target = TargetSettings.model_validate(
        {
            "name": "t",
            "metrics": [
                {"metric": "toy_metadata_value", "name": "goal"},
                {"metric": "pass_at_k", "k": [1, 3], "correct_when": "goal", "threshold": 1.0},
            ],
            "kpis": [{"name": "reliable", "formula": "threshold", "metric": "pass_hat_3", "threshold": 0.5}],
        }
    )
    plan = build_plan(target, registry=toy_registry)
    assert plan.group_score_names() == ["pass_at_1", "pass_hat_1", "pass_at_3", "pass_hat_3"]
    pipeline = Pipeline(plan)
    results = [
        await pipeline.score_sample(Sample(id=f"{item}{i}", item_id=item, metadata={"x": x}))
        for item, xs in {"a": [1, 1, 0], "b": [1, 1, 1]}.items()
        for i, x in enumerate(xs)
    ]
    group = await pipeline.score_group("dataset", results)
    values = group.values(kpis=False)
    assert values["pass_at_1"] == pytest.approx((2 / 3 + 1) / 2)
    assert values["pass_hat_3"] == pytest.approx((0 + 1) / 2)
    assert group.values(kpis=True) == {"reliable": 1.0}

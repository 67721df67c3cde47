"""The tuned threshold and the chosen panel on data whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics

from trace_scorer.calibrate.items import LabelledItem
from trace_scorer.calibrate.panels import choose_panel
from trace_scorer.calibrate.thresholds import curve, tune


def _overlapping(seed: int = 0, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.5).astype(float)
    values = np.where(labels == 1, rng.normal(0.75, 0.05, n), rng.normal(0.6, 0.05, n))
    return labels, values


def test_separable_values_are_split_exactly_between_the_classes() -> None:
    labels = np.asarray([0, 0, 0, 0, 1, 1, 1, 1, 0, 1], dtype=float)
    values = np.asarray([0.1, 0.2, 0.3, 0.35, 0.6, 0.7, 0.8, 0.9, 0.05, 0.65])
    tuning = tune(labels, values, objective="f1", default=0.8, seed=0, n_resamples=200)
    assert tuning is not None
    assert 0.35 < tuning.threshold <= 0.6 and tuning.objective_value == 1.0
    assert tuning.default_value == pytest.approx(metrics.f1_score(labels, values >= 0.8))  # 2 of 5 found
    assert tuning.cv_value is not None and tuning.cv_default_value is not None
    assert tuning.cv_value > tuning.cv_default_value


def test_the_curve_is_f1_and_youden_at_every_threshold() -> None:
    labels, values = _overlapping(1, 80)
    thresholds, f1_values, youden = curve(labels, values)
    for threshold, f1_value, j in zip(thresholds, f1_values, youden, strict=True):
        predicted = values >= threshold
        assert f1_value == pytest.approx(metrics.f1_score(labels, predicted, zero_division=0))
        tpr = metrics.recall_score(labels, predicted)
        fpr = float(np.mean(predicted[labels == 0]))
        assert j == pytest.approx(tpr - fpr)


@pytest.mark.parametrize("objective", ["f1", "youden"])
def test_the_tuned_threshold_of_overlapping_classes_is_between_them_with_an_interval(objective: str) -> None:
    labels, values = _overlapping()
    tuning = tune(labels, values, objective=objective, default=0.8, seed=0, n_resamples=300)
    assert tuning is not None
    assert 0.63 < tuning.threshold < 0.72  # the classes' means are 0.6 and 0.75
    assert tuning.low is not None and tuning.high is not None
    assert tuning.low <= tuning.threshold <= tuning.high and tuning.high - tuning.low < 0.08
    assert tuning.objective_value > tuning.default_value + 0.2  # 0.8 misses most of the positives
    assert tuning.folds == 5 and tuning.cv_value is not None and tuning.cv_value > tuning.cv_default_value  # type: ignore[operator]
    chosen = [p for p in tuning.curve if p.threshold == tuning.threshold]
    assert chosen and getattr(chosen[0], objective) == pytest.approx(tuning.objective_value)


def test_one_class_has_no_threshold() -> None:
    assert tune(np.ones(10), np.linspace(0, 1, 10), objective="f1", default=0.5, seed=0, n_resamples=100) is None


def _panel_items(n: int = 200, seed: int = 0) -> list[LabelledItem]:
    rng = np.random.default_rng(seed)
    items = []
    for index in range(n):
        label = float(rng.random() < 0.5)
        good = label if rng.random() < 0.95 else 1 - label
        fair = label if rng.random() < 0.9 else 1 - label
        coin = float(rng.random() < 0.5)
        items.append(
            LabelledItem(
                str(index),
                [label],
                value=(good + fair + coin) / 3,
                models={"good": good, "fair": fair, "coin": coin},
                costs={"good": 0.01, "fair": 0.001, "coin": 0.0001},
            )
        )
    return items


def test_the_cheapest_panel_within_the_margin_is_chosen_and_the_gap_has_an_interval() -> None:
    items = _panel_items()
    choice = choose_panel(items, ["good", "fair", "coin"], figure="kappa", margin=0.25, seed=0, n_resamples=500)
    assert choice is not None and choice.best is not None and choice.chosen is not None
    labels = [i.label for i in items]
    kappa = {m: metrics.cohen_kappa_score(labels, [i.models[m] for i in items]) for m in ("good", "fair", "coin")}
    singles = {p.models[0]: p.agreement for p in choice.panels if len(p.models) == 1}
    assert singles == pytest.approx(kappa)
    assert choice.best.models == ("good",)
    assert choice.chosen.models == ("fair",) and choice.chosen.cost_per_100 == pytest.approx(0.1)
    assert choice.difference == pytest.approx(kappa["good"] - kappa["fair"])
    assert choice.low is not None and choice.high is not None and choice.low <= choice.difference <= choice.high
    # The panels of two or three models, under each rule, are there with their summed costs.
    everyone = [p for p in choice.panels if len(p.models) == 3]
    assert {p.rule for p in everyone} == {"majority", "any", "all"}
    assert all(p.cost_per_100 == pytest.approx(1.11) for p in everyone)
    majority = next(p for p in everyone if p.rule == "majority")
    votes = [1.0 if i.models["good"] + i.models["fair"] + i.models["coin"] >= 2 else 0.0 for i in items]
    assert majority.agreement == pytest.approx(metrics.cohen_kappa_score(labels, votes))


def test_a_tight_margin_keeps_the_best() -> None:
    choice = choose_panel(_panel_items(), ["good", "fair", "coin"], figure="f1", margin=0.0, seed=0, n_resamples=200)
    assert choice is not None and choice.chosen is choice.best
    assert choice.difference == 0.0


def _rated_items(n: int = 200, seed: int = 1) -> list[LabelledItem]:
    """A 1–5 rating judged by three models on the scale: close (dear), near (cheap), coin (cheapest, random)."""
    rng = np.random.default_rng(seed)
    items = []
    for index in range(n):
        label = float(rng.integers(1, 6))
        close = float(np.clip(label + rng.choice([-1, 0, 0, 0, 0, 0, 0, 1]), 1, 5))
        near = float(np.clip(label + rng.choice([-1, -1, 0, 0, 0, 1, 1]), 1, 5))
        coin = float(rng.integers(1, 6))
        items.append(
            LabelledItem(
                str(index),
                [label],
                value=(close + near + coin) / 3,
                models={"close": close, "near": near, "coin": coin},
                costs={"close": 0.01, "near": 0.001, "coin": 0.0001},
            )
        )
    return items


def test_numeric_panels_are_the_mean_or_median_of_their_models_by_spearman() -> None:
    from scipy import stats

    items = _rated_items()
    models = ["close", "near", "coin"]
    choice = choose_panel(items, models, figure="spearman", margin=0.1, seed=0, n_resamples=500, numeric=True)
    assert choice is not None and choice.best is not None and choice.chosen is not None
    labels = [i.label for i in items]
    values = {m: np.asarray([i.models[m] for i in items]) for m in models}
    expected = {((m,), "mean"): stats.spearmanr(labels, values[m]).statistic for m in models}
    three = np.stack([values[m] for m in models])
    expected[(tuple(models), "mean")] = stats.spearmanr(labels, three.mean(axis=0)).statistic
    expected[(tuple(models), "median")] = stats.spearmanr(labels, np.median(three, axis=0)).statistic
    pair = np.stack([values["close"], values["near"]])
    expected[(("close", "near"), "mean")] = stats.spearmanr(labels, pair.mean(axis=0)).statistic
    found = {(p.models, p.rule): p.agreement for p in choice.panels}
    for key, value in expected.items():
        assert found[key] == pytest.approx(value, abs=1e-9)
    # Two models: their median is their mean, compared once; no voting rule on numbers.
    assert {p.rule for p in choice.panels if len(p.models) == 2} == {"mean"}
    assert {p.rule for p in choice.panels} == {"mean", "median"}
    # The median of three outvotes the random judge, which drags their mean down.
    assert found[(tuple(models), "median")] > found[(tuple(models), "mean")]
    # The best is the dear judge; the cheapest within 0.1 of it is the cheap one alone, at a tenth of the cost.
    assert choice.best.models == ("close",)
    assert choice.chosen.models == ("near",) and choice.chosen.cost_per_100 == pytest.approx(0.1)
    assert choice.difference == pytest.approx(expected[(("close",), "mean")] - expected[(("near",), "mean")])
    assert choice.low is not None and choice.high is not None and choice.low <= choice.difference <= choice.high
    assert choice.low > 0  # the dear judge's lead is real on 200 items, if within the margin


def test_a_single_model_is_no_panel() -> None:
    assert choose_panel(_panel_items(20), ["good"], figure="kappa", margin=0.05, seed=0, n_resamples=100) is None


def test_disagreements_rank_a_verdict_against_the_label_and_split_judges_first() -> None:
    from trace_scorer.calibrate.disagreements import rank
    from trace_scorer.calibrate.items import LabelledSet

    found = LabelledSet("m", "m")
    both = LabelledItem("both", [1.0], value=0.0, trace_id="t-both", models={"a": 1.0, "b": 0.0})
    against = LabelledItem("against", [0.0], value=1.0, trace_id="t-against", models={"a": 1.0, "b": 1.0})
    agreed = LabelledItem("agreed", [1.0], value=1.0, trace_id="t-agreed", models={"a": 1.0, "b": 1.0})
    split = LabelledItem("split", [], value=0.5, trace_id="t-split", models={"a": 1.0, "b": 0.0, "c": 0.0})
    found.items += [agreed, against, both]
    found.unlabelled.append(split)
    ranked = rank(found, threshold=0.5, binary=True)
    assert [d.item for d in ranked] == ["both", "against", "split"]  # the agreed item teaches nothing
    assert ranked[0].judges == 1.0 and ranked[0].against_label is True
    assert ranked[2].judges == pytest.approx(2 / 3) and ranked[2].against_label is None

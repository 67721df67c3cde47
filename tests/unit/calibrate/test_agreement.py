"""The agreement figures against the libraries they come from, on known data: every point figure is
scikit-learn's / scipy's / krippendorff's, and every vectorised form the bootstrap uses answers what the
library answers, on the data and on resamples of it."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics

from trace_scorer.calibrate.agreement import (
    VECTORISED,
    alpha_of_weights,
    binary_agreement,
    krippendorff_alpha,
    numeric_agreement,
)

LABELS = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1]
VERDICTS = [1, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1]


def test_binary_figures_are_scikit_learns_with_intervals_around_them() -> None:
    found = binary_agreement("judge", LABELS, VERDICTS, seed=0, n_resamples=500)
    expected = {
        "accuracy": metrics.accuracy_score(LABELS, VERDICTS),
        "precision": metrics.precision_score(LABELS, VERDICTS),
        "recall": metrics.recall_score(LABELS, VERDICTS),
        "f1": metrics.f1_score(LABELS, VERDICTS),
        "kappa": metrics.cohen_kappa_score(LABELS, VERDICTS),
    }
    assert {name: f.value for name, f in found.figures.items()} == pytest.approx(expected)
    assert expected["accuracy"] == pytest.approx(16 / 20)  # 4 of the 20 differ
    for figure in found.figures.values():
        assert figure.low is not None and figure.high is not None
        assert figure.low <= figure.value <= figure.high  # type: ignore[operator]
        assert figure.high - figure.low > 0.05  # 20 items cannot pin a figure down
    assert found.confusion == metrics.confusion_matrix(LABELS, VERDICTS).tolist() == [[8, 2], [2, 8]]


def test_a_rater_that_always_agrees_has_kappa_one() -> None:
    found = binary_agreement("same", LABELS, LABELS, seed=0, n_resamples=200)
    assert found.figures["kappa"].value == 1.0 and found.figures["kappa"].low == 1.0
    assert found.confusion == [[10, 0], [0, 10]]


@pytest.mark.parametrize("name", ["accuracy", "precision", "recall", "f1", "kappa"])
def test_each_vectorised_binary_form_answers_scikit_learns_on_every_resample(name: str) -> None:
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 60).astype(float)
    p = np.where(rng.random(60) < 0.7, y, 1 - y)
    picks = rng.integers(0, 60, (30, 60))
    library = {
        "accuracy": metrics.accuracy_score,
        "precision": lambda a, b: metrics.precision_score(a, b, zero_division=0),
        "recall": lambda a, b: metrics.recall_score(a, b, zero_division=0),
        "f1": lambda a, b: metrics.f1_score(a, b, zero_division=0),
        "kappa": metrics.cohen_kappa_score,
    }[name]
    vectorised = VECTORISED[name](y[picks], p[picks])
    assert vectorised == pytest.approx([library(y[row], p[row]) for row in picks])


def test_numeric_figures_are_scipys_and_scikit_learns() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(1, 6, 80).astype(float)  # a 1–5 rating
    values = np.clip(labels + rng.integers(-1, 2, 80), 1, 5)
    found = numeric_agreement("judge", labels.tolist(), values.tolist(), seed=0, n_resamples=300)
    assert found.figures["weighted_kappa"].value == pytest.approx(
        metrics.cohen_kappa_score(labels.astype(int), values.astype(int), weights="quadratic")
    )
    assert found.figures["spearman"].value == pytest.approx(stats.spearmanr(labels, values).statistic)
    assert found.figures["pearson"].value == pytest.approx(stats.pearsonr(labels, values).statistic)
    assert found.figures["mae"].value == pytest.approx(metrics.mean_absolute_error(labels, values))
    for figure in found.figures.values():
        assert figure.low is not None and figure.high is not None and figure.low <= figure.value <= figure.high  # type: ignore[operator]


def test_numeric_vectorised_forms_answer_the_libraries_on_resamples() -> None:
    rng = np.random.default_rng(11)
    y = rng.integers(0, 5, 40).astype(float)
    p = np.clip(y + rng.integers(-2, 3, 40), 0, 4).astype(float)
    picks = rng.integers(0, 40, (20, 40))
    assert VECTORISED["weighted_kappa"](y[picks], p[picks]) == pytest.approx(
        [metrics.cohen_kappa_score(y[r].astype(int), p[r].astype(int), weights="quadratic") for r in picks]
    )
    assert VECTORISED["spearman"](y[picks], p[picks]) == pytest.approx(
        [stats.spearmanr(y[r], p[r]).statistic for r in picks]
    )
    assert VECTORISED["pearson"](y[picks], p[picks]) == pytest.approx(
        [stats.pearsonr(y[r], p[r]).statistic for r in picks]
    )


def test_continuous_values_have_no_weighted_kappa() -> None:
    found = numeric_agreement("judge", [0.1, 0.5, 0.9, 0.3], [0.2, 0.4, 0.8, 0.35], seed=0, n_resamples=200)
    assert found.figures["weighted_kappa"].value is None
    assert found.figures["pearson"].value == pytest.approx(
        stats.pearsonr([0.1, 0.5, 0.9, 0.3], [0.2, 0.4, 0.8, 0.35]).statistic
    )


def test_krippendorffs_alpha_is_the_packages_with_missing_ratings() -> None:
    # Krippendorff's own example (nominal, four coders, twelve units, gaps): α = 0.743.
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    found = krippendorff_alpha(data, level="nominal", seed=0, n_resamples=300)
    matrix = np.asarray([[np.nan if v is None else v for v in row] for row in data], dtype=float)
    assert found.value == pytest.approx(krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"))
    assert found.value == pytest.approx(0.743, abs=0.001)
    assert found.low is not None and found.high is not None and found.low <= found.value <= found.high


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_the_vectorised_alpha_is_the_packages_on_every_resample(level: str) -> None:
    """The bootstrap's α of each resample (units drawn with repeats, ratings missing) is the package's."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 3 if level == "nominal" else 5, (4, 60)).astype(float)
    if level == "interval":
        data += rng.random(data.shape) * 0.5  # values between the scale's points
    data[rng.random(data.shape) < 0.3] = np.nan
    data[:, 0] = [2.0, np.nan, np.nan, np.nan]  # a unit with one rating: not pairable
    drawn = [rng.integers(0, 60, 60) for _ in range(40)]
    weights = np.stack([np.bincount(d, minlength=60).astype(float) for d in drawn])
    found = alpha_of_weights(data, level, weights)
    assert found is not None
    expected = [krippendorff.alpha(reliability_data=data[:, d], level_of_measurement=level) for d in drawn]
    assert found == pytest.approx(expected, abs=1e-12)


def test_the_vectorised_alpha_of_a_resample_without_variation_is_undefined() -> None:
    data = np.asarray([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    found = alpha_of_weights(data, "nominal", np.asarray([[2.0, 0.0, 1.0], [1.0, 1.0, 1.0]]))
    assert found is not None and np.isnan(found[0])
    assert found[1] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    assert alpha_of_weights(data, "ordinal", np.ones((1, 3))) is None  # left to the package


def test_alpha_of_raters_who_never_vary_is_not_made_up() -> None:
    assert krippendorff_alpha([[1, 1, 1], [1, 1, 1]], level="nominal", seed=0, n_resamples=100).value is None

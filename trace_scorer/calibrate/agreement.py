"""Agreement of a rater (a judge model, a panel) with the humans' labels, each figure with a bootstrap
interval: for binary labels accuracy, precision, recall, F1, Cohen's κ and the confusion matrix; for
numeric/ordinal labels quadratic-weighted κ, Spearman, Pearson and the mean absolute error; Krippendorff's α
across raters.

The point figures are scikit-learn's, scipy's and ``krippendorff``'s. The intervals come from
``scipy.stats.bootstrap`` (percentile, items resampled with their pairs), which asks a statistic of
thousands of resamples at once: scikit-learn's functions take one sample at a time (a Python loop of
10,000 calls per figure), so each figure also has a vectorised form here (counts of the confusion matrix,
ranks by ``scipy.stats.rankdata``), and tests/unit/calibrate check every form against the library's answer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]
#: Resamples of the bootstrap intervals (``--resamples``).
N_RESAMPLES = 2000
CONFIDENCE = 0.95
#: Resamples drawn at once (bounds memory: batch × items).
BATCH = 200
BINARY_FIGURES = ("accuracy", "precision", "recall", "f1", "kappa")
NUMERIC_FIGURES = ("weighted_kappa", "spearman", "pearson", "mae")


@dataclass(frozen=True)
class Figure:
    """A figure with its bootstrap interval (None when it cannot be drawn: too few items, no variation)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def as_json(self) -> dict[str, float | None]:
        return {"value": _round(self.value), "low": _round(self.low), "high": _round(self.high)}

    def text(self) -> str:
        if self.value is None:
            return "–"
        if self.low is None or self.high is None:
            return f"{self.value:.3f}"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _round(value: float | None) -> float | None:
    return round(value, 6) if value is not None and math.isfinite(value) else None


@dataclass
class Agreement:
    """One rater against the labels."""

    rater: str
    items: int
    figures: dict[str, Figure] = field(default_factory=dict)
    #: Binary: [[true negatives, false positives], [false negatives, true positives]] (rows: the labels).
    confusion: list[list[int]] | None = None
    #: Mean cost of the rater's judge calls per 100 items (USD), when every item's cost is known.
    cost_per_100: float | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rater": self.rater,
            "items": self.items,
            "figures": {name: f.as_json() for name, f in self.figures.items()},
        }
        if self.confusion is not None:
            out["confusion"] = self.confusion
        out["cost_per_100"] = _round(self.cost_per_100)
        return out


# The vectorised forms: labels ``y`` and predictions ``p`` of shape (..., n), answers of shape (...).


def _counts(y: Floats, p: Floats) -> tuple[Floats, Floats, Floats, Floats]:
    """The confusion matrix of 0/1 arrays from three sums (tp, and how many of each side are 1)."""
    tp = np.asarray(np.sum(y * p, axis=-1), dtype=np.float64)
    positives = np.asarray(np.sum(y, axis=-1), dtype=np.float64)
    predicted = np.asarray(np.sum(p, axis=-1), dtype=np.float64)
    fp, fn = predicted - tp, positives - tp
    return tp, y.shape[-1] - tp - fp - fn, fp, fn


def _ratio(top: Floats, bottom: Floats) -> Floats:
    """top / bottom, 0 where bottom is 0 (scikit-learn's ``zero_division=0``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), 0.0)


def from_counts(name: str, tp: Floats, tn: Floats, fp: Floats, fn: Floats) -> Floats:
    """A binary figure from the confusion matrix's counts (one count of a resample for all its figures)."""
    if name == "accuracy":
        return _ratio(tp + tn, tp + tn + fp + fn)
    if name == "precision":
        return _ratio(tp, tp + fp)
    if name == "recall":
        return _ratio(tp, tp + fn)
    if name == "f1":
        return _ratio(2 * tp, 2 * tp + fp + fn)
    # Cohen's κ of two binary raters: (observed − expected agreement) / (1 − expected).
    n = tp + tn + fp + fn
    observed = (tp + tn) / n
    expected = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / (n * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected < 1, (observed - expected) / np.where(expected < 1, 1 - expected, 1.0), np.nan)


def accuracy(y: Floats, p: Floats, axis: int = -1) -> Floats:
    return from_counts("accuracy", *_counts(y, p))


def precision(y: Floats, p: Floats, axis: int = -1) -> Floats:
    return from_counts("precision", *_counts(y, p))


def recall(y: Floats, p: Floats, axis: int = -1) -> Floats:
    return from_counts("recall", *_counts(y, p))


def f1(y: Floats, p: Floats, axis: int = -1) -> Floats:
    return from_counts("f1", *_counts(y, p))


def kappa(y: Floats, p: Floats, axis: int = -1) -> Floats:
    """Cohen's κ of two binary raters."""
    return from_counts("kappa", *_counts(y, p))


def weighted_kappa(y: Floats, p: Floats, axis: int = -1) -> Floats:
    """Quadratic-weighted κ of category indices (scikit-learn's ``weights="quadratic"`` on the positions of
    the categories): 1 − mean((y − p)²) / (var y + var p + (mean y − mean p)²), population moments."""
    disagreement = np.mean((y - p) ** 2, axis=-1)
    chance = np.var(y, axis=-1) + np.var(p, axis=-1) + (np.mean(y, axis=-1) - np.mean(p, axis=-1)) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance > 0, 1 - disagreement / np.where(chance > 0, chance, 1.0), np.nan)


def pearson(y: Floats, p: Floats, axis: int = -1) -> Floats:
    dy = y - np.mean(y, axis=-1, keepdims=True)
    dp = p - np.mean(p, axis=-1, keepdims=True)
    bottom = np.sqrt(np.sum(dy * dy, axis=-1) * np.sum(dp * dp, axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(bottom > 0, np.sum(dy * dp, axis=-1) / np.where(bottom > 0, bottom, 1.0), np.nan)


def spearman(y: Floats, p: Floats, axis: int = -1) -> Floats:
    from scipy.stats import rankdata

    return pearson(rankdata(y, axis=-1), rankdata(p, axis=-1))


def mae(y: Floats, p: Floats, axis: int = -1) -> Floats:
    return np.asarray(np.mean(np.abs(y - p), axis=-1), dtype=np.float64)


VECTORISED: dict[str, Callable[..., Floats]] = {
    "accuracy": accuracy,
    "precision": precision,
    "recall": recall,
    "f1": f1,
    "kappa": kappa,
    "weighted_kappa": weighted_kappa,
    "spearman": spearman,
    "pearson": pearson,
    "mae": mae,
}


def library_figure(name: str, y: Sequence[float] | Floats, p: Sequence[float] | Floats) -> float | None:
    """The point figure as the library computes it (scikit-learn, scipy); None where undefined."""
    from scipy import stats
    from sklearn import metrics

    ys, ps = np.asarray(y, dtype=np.float64), np.asarray(p, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant inputs: the library warns and answers NaN, said as "–"
        if name == "accuracy":
            value = metrics.accuracy_score(ys, ps)
        elif name == "precision":
            value = metrics.precision_score(ys, ps, zero_division=0)
        elif name == "recall":
            value = metrics.recall_score(ys, ps, zero_division=0)
        elif name == "f1":
            value = metrics.f1_score(ys, ps, zero_division=0)
        elif name == "kappa":
            value = metrics.cohen_kappa_score(ys, ps)
        elif name == "weighted_kappa":
            categories = np.unique(np.concatenate([ys, ps]))
            value = metrics.cohen_kappa_score(
                np.searchsorted(categories, ys), np.searchsorted(categories, ps), weights="quadratic"
            )
        elif name == "spearman":
            value = stats.spearmanr(ys, ps).statistic
        elif name == "pearson":
            value = stats.pearsonr(ys, ps).statistic if len(ys) >= 2 else math.nan
        elif name == "mae":
            value = metrics.mean_absolute_error(ys, ps)
        else:
            raise ValueError(f"unknown figure {name!r}")
    value = float(value)
    return value if math.isfinite(value) else None


def _categories(y: Floats, p: Floats) -> tuple[Floats, Floats]:
    """Both sides as positions in their sorted union of values (what weighted κ weighs, as scikit-learn does)."""
    categories = np.unique(np.concatenate([y, p]))
    return np.searchsorted(categories, y).astype(np.float64), np.searchsorted(categories, p).astype(np.float64)


def intervals(
    names: Sequence[str],
    y: Floats,
    p: Floats,
    *,
    seed: int,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, tuple[float, float] | None]:
    """The percentile bootstrap interval of each figure, items resampled with their pairs (scipy): one
    bootstrap for all the figures, the same resamples for each (each figure's statistic on every one)."""
    from scipy import stats

    if y.size < 2 or not names:
        return dict.fromkeys(names)
    yi, pi = _categories(y, p)

    counted = all(n in BINARY_FIGURES for n in names)

    def statistic(y: Floats, p: Floats, yi: Floats, pi: Floats, axis: int = -1) -> Floats:
        if counted:  # the binary figures: the resamples' confusion matrices counted once for all of them
            counts = _counts(y, p)
            return np.stack([from_counts(n, *counts) for n in names])
        return np.stack([VECTORISED[n](yi, pi) if n == "weighted_kappa" else VECTORISED[n](y, p) for n in names])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resamples without variation: NaN, said as no interval
        result = stats.bootstrap(
            (y, p, yi, pi),
            statistic,
            paired=True,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            batch=BATCH,
            rng=np.random.default_rng(seed),
        )
    out: dict[str, tuple[float, float] | None] = {}
    for name, low, high in zip(names, result.confidence_interval.low, result.confidence_interval.high, strict=True):
        out[name] = (float(low), float(high)) if math.isfinite(low) and math.isfinite(high) else None
    return out


def figures(names: Sequence[str], y: Floats, p: Floats, *, seed: int, n_resamples: int) -> dict[str, Figure]:
    """Each figure as its library computes it, with its interval (none for an undefined figure)."""
    values = {name: library_figure(name, y, p) for name in names}
    defined = [name for name in names if values[name] is not None]
    bounds = intervals(defined, y, p, seed=seed, n_resamples=n_resamples)
    return {name: Figure(values[name], *(bounds.get(name) or (None, None))) for name in names}


def binary_agreement(
    rater: str, labels: Sequence[float], verdicts: Sequence[float], *, seed: int, n_resamples: int = N_RESAMPLES
) -> Agreement:
    """Accuracy, precision, recall, F1 and Cohen's κ of 0/1 verdicts against 0/1 labels, and the confusion."""
    from sklearn.metrics import confusion_matrix

    y, p = np.asarray(labels, dtype=np.float64), np.asarray(verdicts, dtype=np.float64)
    out = Agreement(rater, int(y.size))
    out.figures = figures(BINARY_FIGURES, y, p, seed=seed, n_resamples=n_resamples)
    out.confusion = confusion_matrix(y, p, labels=[0.0, 1.0]).astype(int).tolist()
    return out


def numeric_agreement(
    rater: str, labels: Sequence[float], values: Sequence[float], *, seed: int, n_resamples: int = N_RESAMPLES
) -> Agreement:
    """Weighted κ (when both sides are categories: whole numbers), Spearman, Pearson and MAE."""
    y, p = np.asarray(labels, dtype=np.float64), np.asarray(values, dtype=np.float64)
    out = Agreement(rater, int(y.size))
    categorical = bool(np.all(y == np.round(y)) and np.all(p == np.round(p)))
    names = [n for n in NUMERIC_FIGURES if categorical or n != "weighted_kappa"]
    computed = figures(names, y, p, seed=seed, n_resamples=n_resamples)
    out.figures = {name: computed.get(name, Figure(None)) for name in NUMERIC_FIGURES}
    return out


def _unit_sums(data: Floats, level: str) -> tuple[Floats, Floats, Floats] | None:
    """Per unit (column) with two values or more — the pairable ones, as ``krippendorff`` counts them — what
    its coincidences add: m (its values), its observed disagreement (the sum of δ over its ordered pairs of
    values / (m − 1)) and what the expected disagreement needs (counts per category for nominal; the sum and
    the sum of squares of its values for interval). None for a level not summed here (ordinal, ratio)."""
    present = ~np.isnan(data)
    m = present.sum(axis=0).astype(np.float64)
    pairable = m >= 2
    if level == "nominal":
        categories, inverse = np.unique(data[present], return_inverse=True)
        counts = np.zeros((len(categories), data.shape[1]))
        np.add.at(counts, (inverse, np.nonzero(present)[1]), 1.0)
        counts[:, ~pairable] = 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            observed = np.where(pairable, (m * m - np.sum(counts * counts, axis=0)) / (m - 1), 0.0)
        return np.where(pairable, m, 0.0), observed, counts.T
    if level == "interval":
        values = np.where(present, data, 0.0)
        s1, s2 = values.sum(axis=0), (values * values).sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            observed = np.where(pairable, 2 * (m * s2 - s1 * s1) / (m - 1), 0.0)
        sums = np.stack([np.where(pairable, s1, 0.0), np.where(pairable, s2, 0.0)], axis=1)
        return np.where(pairable, m, 0.0), observed, sums
    return None


def alpha_of_weights(data: Floats, level: str, weights: Floats) -> Floats | None:
    """Krippendorff's α of raters × units ``data`` (NaN: not rated) for each row of ``weights`` (resamples ×
    units: how often each unit is drawn): α of ``data[:, drawn]``, as ``krippendorff.alpha`` computes it, for
    all resamples at once — the coincidences of a resample are its units' coincidences summed, so α is a
    matrix product away (the package takes one data set a call: 500 calls of its whole computation; no
    library bootstraps α). NaN where α is undefined (one value in all). None: a level not vectorised."""
    sums = _unit_sums(data, level)
    if sums is None:
        return None
    m, observed, parts = sums
    n = weights @ m
    disagreement = weights @ observed
    spread = weights @ parts
    if level == "nominal":
        expected = n * n - np.sum(spread * spread, axis=1)  # Σ over pairs of different categories: n(n−1)·De
    else:
        expected = 2 * (n * spread[:, 1] - spread[:, 0] ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1 - (n - 1) * disagreement / expected
    return np.asarray(np.where((expected > 1e-12 * np.maximum(n * n, 1.0)) & (n > 1), out, np.nan), dtype=np.float64)


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]],
    *,
    level: Literal["nominal", "ordinal", "interval", "ratio"],
    seed: int,
    n_resamples: int,
) -> Figure:
    """Krippendorff's α (the ``krippendorff`` package) of raters × items (None: that rater did not rate it),
    with a percentile bootstrap interval over items (:func:`alpha_of_weights`, checked against the package)."""
    import krippendorff

    data = np.asarray([[np.nan if v is None else v for v in row] for row in ratings], dtype=np.float64)
    if data.shape[0] < 2 or data.shape[1] < 2:
        return Figure(None)

    def alpha(columns: Floats) -> float | None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = float(krippendorff.alpha(reliability_data=columns, level_of_measurement=level))
        except (ValueError, ZeroDivisionError):  # one value in all: α is undefined
            return None
        return value if math.isfinite(value) else None

    value = alpha(data)
    if value is None:
        return Figure(None)
    rng = np.random.default_rng(seed)
    units = data.shape[1]
    draws: list[float] = []
    for start in range(0, n_resamples, BATCH):
        drawn = [rng.integers(0, units, units) for _ in range(min(BATCH, n_resamples - start))]
        weights = np.stack([np.bincount(d, minlength=units).astype(np.float64) for d in drawn])
        batch = alpha_of_weights(data, level, weights)
        if batch is None:  # ordinal, ratio: the package on each resample
            draws.extend(a for d in drawn if (a := alpha(data[:, d])) is not None)
        else:
            draws.extend(float(a) for a in batch if math.isfinite(a))
    if len(draws) < n_resamples // 2:
        return Figure(value)
    low, high = np.percentile(draws, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return Figure(value, float(low), float(high))

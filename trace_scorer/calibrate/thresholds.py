"""The threshold that turns a numeric metric into the verdict the humans' labels give: the value that
maximises F1 or Youden's J (TPR − FPR) over the labelled items, how well that choice holds on items it was
not chosen on (stratified k-fold cross-validation), its bootstrap interval and the whole curve.

The curve is scikit-learn's ``roc_curve`` (every distinct value as a threshold, "correct when value ≥ t");
F1 at each threshold follows from its true and false positive rates and the class sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trace_scorer.calibrate.agreement import CONFIDENCE, Floats, f1

OBJECTIVES = ("f1", "youden")
#: Points of the curve kept in the report (evenly spread over the thresholds; the chosen one always).
CURVE_POINTS = 200
FOLDS = 5


@dataclass
class CurvePoint:
    threshold: float
    f1: float
    youden: float


@dataclass
class Tuning:
    """The tuned threshold and what it is worth against the default one."""

    objective: str
    threshold: float
    objective_value: float
    default: float
    default_value: float
    #: Cross-validated objective of tuning (tuned on k − 1 folds, scored on the held-out fold) and of the default.
    cv_value: float | None = None
    cv_default_value: float | None = None
    folds: int = 0
    low: float | None = None
    high: float | None = None
    curve: list[CurvePoint] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        def r(value: float | None) -> float | None:
            return round(value, 6) if value is not None and math.isfinite(value) else None

        return {
            "objective": self.objective,
            "threshold": r(self.threshold),
            "interval": [r(self.low), r(self.high)] if self.low is not None else None,
            "objective_value": r(self.objective_value),
            "default": r(self.default),
            "default_value": r(self.default_value),
            "cv_value": r(self.cv_value),
            "cv_default_value": r(self.cv_default_value),
            "folds": self.folds,
            "curve": [{"threshold": r(p.threshold), "f1": r(p.f1), "youden": r(p.youden)} for p in self.curve],
        }


def curve(labels: Floats, values: Floats) -> tuple[Floats, Floats, Floats]:
    """Thresholds (descending), F1 and Youden's J at each: "positive when value ≥ threshold"."""
    from sklearn.metrics import roc_curve

    fpr, tpr, thresholds = roc_curve(labels, values, drop_intermediate=False)
    fpr, tpr, thresholds = fpr[1:], tpr[1:], thresholds[1:]  # the first is +inf: nothing positive
    positives = float(np.sum(labels == 1))
    negatives = float(labels.size) - positives
    tp, fp = tpr * positives, fpr * negatives
    fn = positives - tp
    with np.errstate(divide="ignore", invalid="ignore"):
        f1_values = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1e-300), 0.0)
    return thresholds.astype(np.float64), f1_values, (tpr - fpr).astype(np.float64)


def best_threshold(labels: Floats, values: Floats, objective: str) -> tuple[float, float]:
    """The threshold maximising the objective (the highest of equal ones) and its value."""
    thresholds, f1_values, youden = curve(labels, values)
    scores = f1_values if objective == "f1" else youden
    index = int(np.argmax(scores))
    return float(thresholds[index]), float(scores[index])


def objective_at(labels: Floats, values: Floats, threshold: float, objective: str) -> float:
    predicted = (values >= threshold).astype(np.float64)
    if objective == "f1":
        return float(f1(labels, predicted))
    positives, negatives = labels == 1, labels == 0
    tpr = float(np.mean(predicted[positives])) if positives.any() else 0.0
    fpr = float(np.mean(predicted[negatives])) if negatives.any() else 0.0
    return tpr - fpr


def tune(
    labels: Floats, values: Floats, *, objective: str, default: float, seed: int, n_resamples: int
) -> Tuning | None:
    """None when the labels hold a single class (no threshold separates anything)."""
    from sklearn.model_selection import StratifiedKFold

    if objective not in OBJECTIVES:
        raise ValueError(f"objective {objective!r}: one of {', '.join(OBJECTIVES)}")
    positives = int(np.sum(labels == 1))
    if positives == 0 or positives == labels.size:
        return None
    threshold, value = best_threshold(labels, values, objective)
    out = Tuning(objective, threshold, value, default, objective_at(labels, values, default, objective))

    folds = min(FOLDS, positives, labels.size - positives)
    if folds >= 2:
        tuned_scores, default_scores = [], []
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        for train, test in splitter.split(values.reshape(-1, 1), labels):
            chosen, _ = best_threshold(labels[train], values[train], objective)
            tuned_scores.append(objective_at(labels[test], values[test], chosen, objective))
            default_scores.append(objective_at(labels[test], values[test], default, objective))
        out.cv_value, out.cv_default_value = float(np.mean(tuned_scores)), float(np.mean(default_scores))
        out.folds = folds

    rng = np.random.default_rng(seed)
    drawn = []
    for _ in range(n_resamples):
        pick = rng.integers(0, labels.size, labels.size)
        resampled = labels[pick]
        if 0 < np.sum(resampled) < resampled.size:
            drawn.append(best_threshold(resampled, values[pick], objective)[0])
    if drawn:
        low, high = np.percentile(drawn, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
        out.low, out.high = float(low), float(high)

    thresholds, f1_values, youden = curve(labels, values)
    keep = sorted(
        set(np.linspace(0, thresholds.size - 1, min(CURVE_POINTS, thresholds.size)).round().astype(int).tolist())
        | {int(np.argmax(f1_values if objective == "f1" else youden))}
    )
    out.curve = [CurvePoint(float(thresholds[i]), float(f1_values[i]), float(youden[i])) for i in keep]
    return out

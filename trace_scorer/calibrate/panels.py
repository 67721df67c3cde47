"""Judge panels chosen on data: every subset of the judge models under each rule, its agreement with the
humans and its cost per 100 items, and the cheapest panel whose agreement is within a margin of the best —
with the paired bootstrap interval of the difference, which says whether the gap is real.

Binary labels: the models' 0/1 verdicts under a voting rule (majority, any, all). Numeric/ordinal labels (a
judge's 1–5 or 0–1 score): the panel's value is the mean or the median of its models' values, ranked by
Spearman's ρ (:data:`NUMERIC_FIGURE`; docs/calibrate.md says why)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trace_scorer.calibrate.agreement import BATCH, CONFIDENCE, VECTORISED, Floats
from trace_scorer.calibrate.items import LabelledItem

RULES = ("majority", "any", "all")
#: A numeric panel's value: the mean or the median of its models' values.
NUMERIC_RULES = ("mean", "median")
#: The agreement numeric panels are ranked by: rank correlation, defined for a mean or a median that falls
#: between the scale's points (weighted κ needs whole categories) and blind to a constant offset of the scale.
NUMERIC_FIGURE = "spearman"
#: Panels of more models than this are not enumerated (2^n subsets).
MAX_MODELS = 10


@dataclass
class Panel:
    models: tuple[str, ...]
    rule: str
    agreement: float | None
    cost_per_100: float | None

    @property
    def name(self) -> str:
        joined = " + ".join(self.models)
        return joined if len(self.models) == 1 else f"{self.rule}({joined})"

    def as_json(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "rule": self.rule,
            "agreement": _r(self.agreement),
            "cost_per_100": _r(self.cost_per_100),
        }


def _r(value: float | None) -> float | None:
    return round(value, 6) if value is not None and math.isfinite(value) else None


@dataclass
class PanelChoice:
    """Every panel, the best, and the cheapest within ``margin`` of it."""

    figure: str
    margin: float
    items: int
    panels: list[Panel] = field(default_factory=list)
    best: Panel | None = None
    chosen: Panel | None = None
    #: best − chosen agreement, and its interval: an interval holding 0 says the gap may be chance.
    difference: float | None = None
    low: float | None = None
    high: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "margin": self.margin,
            "items": self.items,
            "best": self.best.as_json() if self.best else None,
            "chosen": self.chosen.as_json() if self.chosen else None,
            "difference": {"value": _r(self.difference), "low": _r(self.low), "high": _r(self.high)},
            "panels": [p.as_json() for p in self.panels],
        }


def verdicts(matrix: Floats, rule: str) -> Floats:
    """Models × items of 0/1 verdicts → the panel's verdict per item (a tie of a majority fails); of numeric
    values → their mean or median per item."""
    if rule == "mean":
        return np.asarray(matrix.mean(axis=0), dtype=np.float64)
    if rule == "median":
        return np.asarray(np.median(matrix, axis=0), dtype=np.float64)
    if rule == "majority":
        return np.asarray(matrix.mean(axis=0) > 0.5, dtype=np.float64)
    if rule == "any":
        return np.asarray(matrix.max(axis=0), dtype=np.float64)
    return np.asarray(matrix.min(axis=0), dtype=np.float64)


def _rules(size: int, numeric: bool) -> tuple[str, ...]:
    """The rules worth comparing for a panel of ``size`` models: one model is itself; a majority of two is
    "all", and the median of two is their mean."""
    if numeric:
        return NUMERIC_RULES if size > 2 else ("mean",)
    if size == 1:
        return ("majority",)
    return ("any", "all") if size == 2 else RULES


def choose_panel(
    items: Sequence[LabelledItem],
    models: Sequence[str],
    *,
    figure: str,
    margin: float,
    seed: int,
    n_resamples: int,
    numeric: bool = False,
) -> PanelChoice | None:
    """None with fewer than two models or no item every model judged. ``numeric``: the labels and the models'
    values as they are, panels by mean or median (``figure`` should then be a numeric one)."""
    from scipy import stats

    common = [item for item in items if all(m in item.models for m in models)]
    if len(models) < 2 or not common or len(models) > MAX_MODELS:
        return None
    if numeric:
        labels = np.asarray([item.label for item in common], dtype=np.float64)
        matrix = np.asarray([[item.models[m] for item in common] for m in models], dtype=np.float64)
    else:
        labels = np.asarray([1.0 if item.label >= 0.5 else 0.0 for item in common])
        matrix = np.asarray([[1.0 if item.models[m] >= 0.5 else 0.0 for item in common] for m in models])
    costs: dict[str, float | None] = {}
    for m in models:
        known = [item.costs[m] for item in common if m in item.costs]
        costs[m] = 100 * sum(known) / len(known) if len(known) == len(common) else None
    statistic = VECTORISED[figure]
    out = PanelChoice(figure, margin, len(common))
    predictions: dict[tuple[tuple[str, ...], str], Floats] = {}
    for size in range(1, len(models) + 1):
        for subset in itertools.combinations(range(len(models)), size):
            for rule in _rules(size, numeric):
                predicted = verdicts(matrix[list(subset)], rule)
                names = tuple(models[i] for i in subset)
                value = float(statistic(labels, predicted))
                parts = [costs[n] for n in names]
                cost = sum(c for c in parts if c is not None) if all(c is not None for c in parts) else None
                out.panels.append(Panel(names, rule, value if math.isfinite(value) else None, cost))
                predictions[(names, rule)] = predicted
    scored = [p for p in out.panels if p.agreement is not None]
    if not scored:
        return out
    out.best = max(scored, key=lambda p: (p.agreement or 0.0, -(p.cost_per_100 or 0.0)))
    assert out.best.agreement is not None
    near = [p for p in scored if (p.agreement or 0.0) >= out.best.agreement - margin]
    out.chosen = min(
        near,
        key=lambda p: (p.cost_per_100 if p.cost_per_100 is not None else math.inf, len(p.models), -(p.agreement or 0)),
    )
    assert out.chosen.agreement is not None
    out.difference = out.best.agreement - out.chosen.agreement
    best_p = predictions[(out.best.models, out.best.rule)]
    chosen_p = predictions[(out.chosen.models, out.chosen.rule)]

    def gap(y: Floats, a: Floats, b: Floats, axis: int = -1) -> Floats:
        return np.asarray(statistic(y, a) - statistic(y, b), dtype=np.float64)

    if len(common) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = stats.bootstrap(
                (labels, best_p, chosen_p),
                gap,
                paired=True,
                vectorized=True,
                n_resamples=n_resamples,
                confidence_level=CONFIDENCE,
                method="percentile",
                batch=BATCH,
                rng=np.random.default_rng(seed),
            )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            out.low, out.high = low, high
    out.panels.sort(key=lambda p: (-(p.agreement if p.agreement is not None else -math.inf), p.cost_per_100 or 0.0))
    return out

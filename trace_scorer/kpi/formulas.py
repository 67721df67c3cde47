"""KPI formulas (SPEC.md "KPI formulas"): combine metric values into one score.

A KPI reads named results (metric scores, or other KPIs). If any input has no value on a sample the KPI is
skipped with the reason (never a silent zero); so is a division by zero.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trace_scorer.config.targets import (
    AverageKpi,
    ExpressionKpi,
    F1Kpi,
    KpiEntry,
    MaxKpi,
    MinKpi,
    ThresholdKpi,
    WeightedSumKpi,
)
from trace_scorer.kpi.expression import DivisionByZero, compile_expression
from trace_scorer.metrics.base import Outcome, Score, Skipped

Compute = Callable[[Mapping[str, float]], float]

_DIRECTIONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class Kpi:
    """A configured KPI, ready to evaluate: its name, the results it reads, and the arithmetic."""

    name: str
    formula: str
    inputs: tuple[str, ...]
    compute: Compute
    description: str

    def evaluate(self, results: Mapping[str, Outcome]) -> Outcome:
        values: dict[str, float] = {}
        for name in self.inputs:
            outcome = results.get(name)
            if not isinstance(outcome, Score):
                why = "not computed" if outcome is None else outcome.reason
                return Skipped(f"{self.name}: input {name!r} has no value ({why})")
            values[name] = outcome.value
        try:
            value = self.compute(values)
        except DivisionByZero:
            return Skipped(f"{self.name}: division by zero in {self.description}")
        return Score(value=value, comment=f"{self.formula}: {self.description}", details={"inputs": values})


def _average(values: list[float]) -> float:
    return sum(values) / len(values)


_COMBINE: dict[str, Callable[[list[float]], float]] = {"average": _average, "min": min, "max": max}


def _f1(precision: float, recall: float) -> float:
    # F1 is defined as 0 when both precision and recall are 0 (the usual convention, e.g. scikit-learn).
    total = precision + recall
    return 0.0 if total == 0 else 2 * precision * recall / total


def build_kpi(entry: KpiEntry, metric_names: tuple[str, ...]) -> Kpi:
    """Compile one ``[[targets.kpis]]`` entry. ``metric_names``: the target's metric score names,
    used when ``metrics`` is omitted. Raises ValueError (with the reason) on a bad expression."""
    match entry:
        case AverageKpi() | MinKpi() | MaxKpi():
            names = tuple(entry.metrics) if entry.metrics is not None else metric_names
            if not names:
                raise ValueError("needs at least one metric")
            combine = _COMBINE[entry.formula]
            return Kpi(
                entry.name,
                entry.formula,
                names,
                lambda v: combine([v[n] for n in names]),
                f"{entry.formula}({', '.join(names)})",
            )
        case WeightedSumKpi():
            weights = dict(entry.weights)
            total_weight = sum(weights.values())
            if entry.normalize and total_weight == 0:
                raise ValueError("weights: normalize = true needs weights that do not sum to 0")
            divisor = total_weight if entry.normalize else 1.0

            def weighted(v: Mapping[str, float]) -> float:
                return sum(w * v[n] for n, w in weights.items()) / divisor

            text = " + ".join(f"{w:g}·{n}" for n, w in weights.items())
            if entry.normalize:
                text = f"({text}) / {total_weight:g}"
            return Kpi(entry.name, entry.formula, tuple(weights), weighted, text)
        case ThresholdKpi():
            test = _DIRECTIONS[entry.direction]
            metric, threshold = entry.metric, entry.threshold
            return Kpi(
                entry.name,
                entry.formula,
                (metric,),
                lambda v: 1.0 if test(v[metric], threshold) else 0.0,
                f"{metric} {entry.direction} {threshold:g}",
            )
        case F1Kpi():
            p, r = entry.precision, entry.recall
            return Kpi(entry.name, entry.formula, (p, r), lambda v: _f1(v[p], v[r]), f"F1({p}, {r})")
        case ExpressionKpi():
            expression = compile_expression(entry.expression)
            return Kpi(entry.name, entry.formula, expression.names, expression.evaluate, entry.expression)
    raise AssertionError(f"unhandled formula {entry!r}")  # pragma: no cover - the union is exhaustive

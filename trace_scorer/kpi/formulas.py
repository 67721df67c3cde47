"""The KPI formulas (docs/metrics.md "KPI formulas"), one class each, and the registry of them by name.

Each class holds its ``Options`` (the keys of its ``[[targets.kpis]]`` entry, validated with the settings
by config/targets.py) and its arithmetic. Adding a formula: a class here and its line in ``FORMULAS``, or,
from another package, a ``KpiFormula`` subclass with a ``key`` under the entry-point group
``trace_scorer.kpi_formulas``.
"""

from __future__ import annotations

import operator
from abc import abstractmethod
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar, Literal

from pydantic import Field

from trace_scorer.kpi.base import FormulaOptions, Kpi, KpiFormula, KpiSpec, Number
from trace_scorer.kpi.expression import compile_expression
from trace_scorer.runtime.plugins import KPI_FORMULAS_GROUP, PluginError, load_plugins


class CombineOptions(FormulaOptions):
    """Options of ``average``, ``min`` and ``max``."""

    #: The metrics combined; all of the target's metrics when omitted.
    metrics: list[str] | None = None


class _Combine(KpiFormula[CombineOptions]):
    """One function of several results: the listed metrics, or all of the target's metrics."""

    Options: ClassVar[type[CombineOptions]] = CombineOptions

    def __init__(self, options: CombineOptions, metric_names: tuple[str, ...]) -> None:
        super().__init__(options, metric_names)
        self.names = tuple(options.metrics) if options.metrics is not None else metric_names
        if not self.names:
            raise ValueError("needs at least one metric")

    @staticmethod
    @abstractmethod
    def combine(values: list[float]) -> float:
        """The KPI from the inputs' values, in the order of ``inputs()``."""

    def inputs(self) -> tuple[str, ...]:
        return self.names

    def compute(self, values: Mapping[str, float]) -> float:
        return self.combine([values[n] for n in self.names])

    def describe(self) -> str:
        return f"{self.key}({', '.join(self.names)})"


class AverageFormula(_Combine):
    key: ClassVar[str] = "average"

    @staticmethod
    def combine(values: list[float]) -> float:
        return sum(values) / len(values)


class MinFormula(_Combine):
    key: ClassVar[str] = "min"

    @staticmethod
    def combine(values: list[float]) -> float:
        return min(values)


class MaxFormula(_Combine):
    key: ClassVar[str] = "max"

    @staticmethod
    def combine(values: list[float]) -> float:
        return max(values)


class WeightedSumOptions(FormulaOptions):
    """Options of ``weighted_sum``."""

    weights: dict[str, Number] = Field(min_length=1)
    #: Divide by the sum of the weights (a weighted mean) instead of the plain Σ wᵢ·mᵢ.
    normalize: bool = False


class WeightedSumFormula(KpiFormula[WeightedSumOptions]):
    """Σ wᵢ·mᵢ, or ÷ Σ wᵢ with ``normalize``."""

    key: ClassVar[str] = "weighted_sum"
    Options: ClassVar[type[WeightedSumOptions]] = WeightedSumOptions

    def __init__(self, options: WeightedSumOptions, metric_names: tuple[str, ...]) -> None:
        super().__init__(options, metric_names)
        self.weights = dict(options.weights)
        self.total_weight = sum(self.weights.values())
        if options.normalize and self.total_weight == 0:
            raise ValueError("weights: normalize = true needs weights that do not sum to 0")
        self.divisor = self.total_weight if options.normalize else 1.0

    def inputs(self) -> tuple[str, ...]:
        return tuple(self.weights)

    def compute(self, values: Mapping[str, float]) -> float:
        return sum(w * values[n] for n, w in self.weights.items()) / self.divisor

    def describe(self) -> str:
        text = " + ".join(f"{w:g}·{n}" for n, w in self.weights.items())
        return f"({text}) / {self.total_weight:g}" if self.options.normalize else text


_DIRECTIONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


class ThresholdOptions(FormulaOptions):
    """Options of ``threshold``."""

    metric: str
    threshold: Number
    direction: Literal[">=", ">", "<=", "<"] = ">="


class ThresholdFormula(KpiFormula[ThresholdOptions]):
    """1 when the metric passes the threshold in the given direction, else 0."""

    key: ClassVar[str] = "threshold"
    Options: ClassVar[type[ThresholdOptions]] = ThresholdOptions
    value_range: ClassVar[tuple[float | None, float | None]] = (0.0, 1.0)

    def inputs(self) -> tuple[str, ...]:
        return (self.options.metric,)

    def compute(self, values: Mapping[str, float]) -> float:
        passes = _DIRECTIONS[self.options.direction](values[self.options.metric], self.options.threshold)
        return 1.0 if passes else 0.0

    def describe(self) -> str:
        return f"{self.options.metric} {self.options.direction} {self.options.threshold:g}"


class F1Options(FormulaOptions):
    """Options of ``f1``."""

    precision: str
    recall: str


class F1Formula(KpiFormula[F1Options]):
    """2PR / (P + R) of two results."""

    key: ClassVar[str] = "f1"
    Options: ClassVar[type[F1Options]] = F1Options

    def inputs(self) -> tuple[str, ...]:
        return (self.options.precision, self.options.recall)

    def compute(self, values: Mapping[str, float]) -> float:
        precision, recall = values[self.options.precision], values[self.options.recall]
        # F1 is defined as 0 when both precision and recall are 0 (the usual convention, e.g. scikit-learn).
        total = precision + recall
        return 0.0 if total == 0 else 2 * precision * recall / total

    def describe(self) -> str:
        return f"F1({self.options.precision}, {self.options.recall})"


class ExpressionOptions(FormulaOptions):
    """Options of ``expression``."""

    expression: str = Field(min_length=1, max_length=2000)


class ExpressionFormula(KpiFormula[ExpressionOptions]):
    """An arithmetic expression over score names (the language is in kpi/expression.py).

    The constructor raises :class:`~trace_scorer.kpi.expression.ExpressionError` (a ValueError, reported
    naming the ``expression`` key) when the expression cannot be parsed.
    """

    key: ClassVar[str] = "expression"
    Options: ClassVar[type[ExpressionOptions]] = ExpressionOptions

    def __init__(self, options: ExpressionOptions, metric_names: tuple[str, ...]) -> None:
        super().__init__(options, metric_names)
        self.expression = compile_expression(options.expression)

    def inputs(self) -> tuple[str, ...]:
        return self.expression.names

    def compute(self, values: Mapping[str, float]) -> float:
        return self.expression.evaluate(values)

    def describe(self) -> str:
        return self.options.expression


FormulaClass = type[KpiFormula[Any]]

#: The built-in formulas, in the order error messages list them. A new formula is one line here.
FORMULAS: dict[str, FormulaClass] = {
    cls.key: cls
    for cls in (
        AverageFormula,
        MinFormula,
        MaxFormula,
        WeightedSumFormula,
        ThresholdFormula,
        F1Formula,
        ExpressionFormula,
    )
}


def _is_formula_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, KpiFormula) and isinstance(vars(obj).get("key"), str)


@cache
def installed_formulas() -> dict[str, FormulaClass]:
    """The built-in formulas, then the installed plug-ins' (``trace_scorer.kpi_formulas`` entry points).

    Loaded on first use (the first KPI entry validated), not at import: a plug-in's module imports
    trace-scorer's modules, which would otherwise load it while it is still half-imported; and a broken
    plug-in is then reported where the CLI reports configuration errors (exit 2). Raises PluginError for a
    plug-in that does not load, is not a formula class, or reuses a name."""
    formulas = dict(FORMULAS)
    for cls in load_plugins(KPI_FORMULAS_GROUP, _is_formula_class, "a KpiFormula class with a key"):
        if cls.key in formulas and formulas[cls.key] is not cls:
            first = formulas[cls.key]
            raise PluginError(
                f"KPI formula {cls.key!r} is defined twice: {first.__module__}.{first.__name__} "
                f"and {cls.__module__}.{cls.__name__}"
            )
        formulas[cls.key] = cls
    return formulas


def build_kpi(entry: KpiSpec, metric_names: tuple[str, ...]) -> Kpi:
    """Compile one ``[[targets.kpis]]`` entry. ``metric_names``: the target's metric score names,
    used when ``metrics`` is omitted. Raises ValueError (with the reason) on a bad expression."""
    formula = installed_formulas()[entry.formula](entry.options, metric_names)
    return Kpi(entry.name, entry.formula, formula.inputs(), formula.compute, formula.describe(), formula.value_range)

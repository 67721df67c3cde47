"""What a KPI formula is: its options model and its arithmetic, in one class (docs/metrics.md "KPI formulas").

A formula class (kpi/formulas.py) declares the keys of its ``[[targets.kpis]]`` entry besides ``name``
and ``formula`` as a pydantic ``Options`` model, validated with the settings (config/targets.py), and
computes the KPI from the named results it reads. A configured, ready-to-evaluate KPI is a :class:`Kpi`.

A KPI reads named results (metric scores, or other KPIs). If any input has no value on a sample the KPI is
skipped with the reason (never a silent zero); so is a division by zero.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import AllowInfNan, BaseModel, BeforeValidator, ConfigDict

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.kpi.expression import DivisionByZero

Compute = Callable[[Mapping[str, float]], float]


def _refuse_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


#: A number in a formula's options: never a boolean (``true`` would be 1), never NaN or ±Infinity.
Number = Annotated[float, BeforeValidator(_refuse_bool), AllowInfNan(False)]


class FormulaOptions(BaseModel):
    """Base of every formula's options: unknown keys are configuration errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


OptionsT = TypeVar("OptionsT", bound=FormulaOptions)


class KpiFormula(ABC, Generic[OptionsT]):
    """Base of every KPI formula. Subclasses set the class attributes and implement the three methods.

    Class attributes:
      key: the formula's name, as written in ``formula = "weighted_sum"`` (its key in the registry).
      Options: pydantic model of the entry's other keys (validated at start-up, errors naming the key).
      value_range: the (low, high) bounds of its values, ``None`` for no bound: the range of the KPI's
        score config in Langfuse. Unbounded unless declared (a weighted sum or an expression may leave
        [0, 1]); ``threshold`` declares (0, 1).

    An instance is the formula bound to one target: ``metric_names`` are the target's per-sample metric
    score names (the default inputs of ``average``, ``min``, ``max``). The constructor raises ValueError
    (reported naming the entry) for what only shows once bound, such as weights summing to 0.
    """

    key: ClassVar[str]
    Options: ClassVar[type[FormulaOptions]] = FormulaOptions
    value_range: ClassVar[tuple[float | None, float | None]] = (None, None)

    def __init__(self, options: OptionsT, metric_names: tuple[str, ...]) -> None:
        self.options = options
        self.metric_names = metric_names

    @abstractmethod
    def inputs(self) -> tuple[str, ...]:
        """The score names this KPI reads (metrics or other KPIs)."""

    @abstractmethod
    def compute(self, values: Mapping[str, float]) -> float:
        """The KPI from the values of its inputs (all present); may raise DivisionByZero."""

    @abstractmethod
    def describe(self) -> str:
        """How the value is computed, for the score's comment (``0.6·tca + 0.4·rouge``)."""


class KpiSpec(Protocol):
    """What a KPI is built from: a ``[[targets.kpis]]`` entry (trace_scorer.config.targets.KpiEntry)."""

    @property
    def name(self) -> str: ...

    @property
    def formula(self) -> str: ...

    @property
    def options(self) -> FormulaOptions: ...


@dataclass(frozen=True)
class Kpi:
    """A configured KPI, ready to evaluate: its name, the results it reads, and the arithmetic."""

    name: str
    formula: str
    inputs: tuple[str, ...]
    compute: Compute
    description: str
    #: The formula's declared bounds (:attr:`KpiFormula.value_range`).
    value_range: tuple[float | None, float | None] = (None, None)

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
        except OverflowError:
            return Skipped(f"{self.name}: the value overflows (not a finite number) in {self.description}")
        if not math.isfinite(value):
            # inf or nan (e.g. rouge * 1e308 * 10): not a score Langfuse or a JSON reader can take.
            return Skipped(f"{self.name}: the value is not a finite number ({value}) in {self.description}")
        return Score(value=value, comment=f"{self.formula}: {self.description}", details={"inputs": values})

"""The ``[[targets]]`` schema: what to score, with which metrics and KPI formulas.

Metric options are validated later, against the metric's own ``Options`` model, when the target's
plan is built (trace_scorer.plan): the registry, not this schema, knows each metric's options.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from trace_scorer.config.common import Duration, ScoreName, StrictModel
from trace_scorer.config.references import ReferenceSettings


class MetricEntry(StrictModel):
    """``[[targets.metrics]]``: a registry key, an optional score name, and the metric's options."""

    model_config = ConfigDict(extra="allow")

    metric: str
    name: ScoreName | None = None

    @property
    def score_name(self) -> str:
        return self.name or self.metric

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class _Kpi(StrictModel):
    name: ScoreName


class AverageKpi(_Kpi):
    formula: Literal["average"]
    #: The metrics combined; all of the target's metrics when omitted.
    metrics: list[str] | None = None


class MinKpi(_Kpi):
    formula: Literal["min"]
    metrics: list[str] | None = None


class MaxKpi(_Kpi):
    formula: Literal["max"]
    metrics: list[str] | None = None


class WeightedSumKpi(_Kpi):
    formula: Literal["weighted_sum"]
    weights: dict[str, float] = Field(min_length=1)
    #: Divide by the sum of the weights (a weighted mean) instead of the plain Σ wᵢ·mᵢ.
    normalize: bool = False


class ThresholdKpi(_Kpi):
    formula: Literal["threshold"]
    metric: str
    threshold: float
    direction: Literal[">=", ">", "<=", "<"] = ">="


class F1Kpi(_Kpi):
    formula: Literal["f1"]
    precision: str
    recall: str


class ExpressionKpi(_Kpi):
    formula: Literal["expression"]
    expression: str = Field(min_length=1, max_length=2000)


KpiEntry = Annotated[
    AverageKpi | MinKpi | MaxKpi | WeightedSumKpi | ThresholdKpi | F1Kpi | ExpressionKpi,
    Field(discriminator="formula"),
]


#: ``group_by`` value meaning "every sample read is in one group" (e.g. pass@k over a whole file).
ALL_SAMPLES = "*"


class TargetSettings(StrictModel):
    """``[[targets]]``: one stream of work (production traces or dataset runs) and how to score it."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    source: Literal["traces", "dataset_runs"] = "traces"
    #: How often the worker looks for new work.
    interval: Duration = 60.0
    #: Offline: the sample field that groups samples (e.g. "run_id", "metadata.KEY"), or "*" for one group
    #: of all the samples read; group metrics and run-level KPIs are computed per group. The dataset_runs
    #: source always groups by run.
    group_by: str | None = None
    metrics: list[MetricEntry] = Field(default_factory=list)
    kpis: list[KpiEntry] = Field(default_factory=list)
    #: Where expected answers, goals, reference calls and topics are read from (JSON paths).
    references: ReferenceSettings = Field(default_factory=ReferenceSettings)

    @model_validator(mode="after")
    def _needs_metrics(self) -> TargetSettings:
        if not self.metrics:
            raise ValueError("a target needs at least one [[targets.metrics]] entry")
        return self

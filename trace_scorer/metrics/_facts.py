"""Trace facts as scores (docs/metrics.md "Trace facts"): one Sample field posted as it is, so that
dashboards can chart it beside the quality scores. Values are counts and amounts, not [0, 1]: each
declares ``value_range = (0, None)``. A trace that does not report the fact is skipped, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from trace_scorer.data.outcomes import Outcome, Score
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample


class FactMetric(Metric[MetricOptions]):
    """A per-sample fact: ``field`` (also the one required input), with ``unit`` in the comment."""

    field: ClassVar[str]
    unit: ClassVar[str]
    value_range: ClassVar[tuple[float | None, float | None]] = (0.0, None)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "field" in cls.__dict__:
            cls.requires = (cls.field,)

    def fact(self, sample: Sample) -> float:
        value = getattr(sample, self.field)
        return float(value)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        value = self.fact(sample)
        return Score(value, f"{value:g} {self.unit}")

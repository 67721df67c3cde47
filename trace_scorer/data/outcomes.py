"""What scoring one sample (or group) with one metric comes to: a :class:`Score`, :class:`Skipped` or
:class:`Failed`.

A neutral module: the metrics return these (trace_scorer.metrics.base re-exports them), the pipeline,
the reports, the KPIs and the worker read them, and none of those has to import another for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The Langfuse score data types a metric's value can be posted as.
DataType = Literal["NUMERIC", "BOOLEAN", "CATEGORICAL"]


@dataclass(frozen=True, slots=True)
class Score:
    """A value in [0, 1] with a one-line comment (shown in Langfuse) and details (score metadata).

    ``data_type`` says how Langfuse gets it: NUMERIC the value, BOOLEAN the value as 1/0, CATEGORICAL
    ``label`` (the category; ``value`` is then its position among the metric's categories).
    """

    value: float
    comment: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    data_type: DataType = "NUMERIC"
    label: str | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """No value, by design: an input is absent or the metric does not apply. Nothing is posted."""

    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    """No value, by accident: the metric could not be computed now (posted nothing; retry later)."""

    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


Outcome = Score | Skipped | Failed

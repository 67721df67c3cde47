"""``latency``: the trace's duration in seconds (the root's end − start), a trace fact (metrics/_facts.py)."""

from __future__ import annotations

from typing import ClassVar

from trace_scorer.metrics._facts import FactMetric


class Latency(FactMetric):
    key: ClassVar[str] = "latency"
    description: ClassVar[str] = "The trace's duration in seconds"
    field: ClassVar[str] = "latency"
    unit: ClassVar[str] = "s"

"""``total_cost``: the cost of every generation of the trace as Langfuse computed it (USD), a trace fact
(metrics/_facts.py). Skipped when no generation carries a cost (no model price known to Langfuse)."""

from __future__ import annotations

from typing import ClassVar

from trace_scorer.metrics._facts import FactMetric


class TotalCost(FactMetric):
    key: ClassVar[str] = "total_cost"
    description: ClassVar[str] = "Cost of the trace's generations in USD"
    field: ClassVar[str] = "total_cost"
    unit: ClassVar[str] = "USD"

"""``tool_call_count``: how many tool calls the trace made, a trace fact (metrics/_facts.py)."""

from __future__ import annotations

from typing import ClassVar

from trace_scorer.metrics._facts import FactMetric
from trace_scorer.sample import Sample


class ToolCallCount(FactMetric):
    key: ClassVar[str] = "tool_call_count"
    description: ClassVar[str] = "Number of tool calls the trace made"
    field: ClassVar[str] = "tool_calls"
    unit: ClassVar[str] = "calls"

    def fact(self, sample: Sample) -> float:
        return float(len(sample.tool_calls or ()))

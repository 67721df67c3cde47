"""``total_tokens``: the tokens of every generation of the trace, a trace fact (metrics/_facts.py)."""

from __future__ import annotations

from typing import ClassVar

from trace_scorer.metrics._facts import FactMetric


class TotalTokens(FactMetric):
    key: ClassVar[str] = "total_tokens"
    description: ClassVar[str] = "Tokens used by the trace's generations"
    field: ClassVar[str] = "total_tokens"
    unit: ClassVar[str] = "tokens"

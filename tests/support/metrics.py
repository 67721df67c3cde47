"""Helpers for the metric tests: building calls and samples, checking what every score must satisfy."""

from __future__ import annotations

import json
from typing import Any

from trace_scorer.metrics.base import MetricOutput, Score
from trace_scorer.sample import Sample, ToolCall


def call(name: str, /, result: Any = None, **arguments: Any) -> ToolCall:
    """``call("get_weather", city="Tokyo")`` → a ToolCall."""
    return ToolCall(name=name, arguments=arguments, result=result)


def sample(**fields: Any) -> Sample:
    return Sample(id=fields.pop("id", "s1"), **fields)


def checked(outcome: MetricOutput) -> Score:
    """The outcome as a Score, after checking the contract every score keeps (docs/metrics.md "Values and names")."""
    assert isinstance(outcome, Score), outcome
    assert 0.0 <= outcome.value <= 1.0
    assert outcome.comment and "\n" not in outcome.comment
    json.dumps(outcome.details)  # details go into Langfuse score metadata
    return outcome

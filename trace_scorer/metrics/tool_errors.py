"""ToolErrors: the share of tool executions that failed, with the failing tools named (docs/metrics.md;
no reference, no LLM). Lower is better.

An execution is a call whose outcome the trace recorded: a result or an error (``ToolCall.error``:
a TOOL observation with level ERROR and its status message, a ``ToolMessage`` with ``status: "error"``,
an ``isError``/``is_error`` result, ``{"error": …}``, a text starting ``Error:``; docs/formats.md). Calls
with neither are not executions we can judge; with no execution at all the metric is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample


class ToolErrors(Metric[MetricOptions]):
    key: ClassVar[str] = "tool_errors"
    description: ClassVar[str] = "Share of tool executions that failed (lower is better)"
    requires: ClassVar[tuple[str, ...]] = ("tool_calls",)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        executed = [c for c in sample.tool_calls or () if c.result is not None or c.error is not None]
        if not executed:
            return Skipped("no tool execution was recorded (no call has a result or an error)")
        failed = [(index, c) for index, c in enumerate(executed) if c.error is not None]
        value = len(failed) / len(executed)
        comment = f"{len(failed)} of {len(executed)} tool executions failed"
        if failed:
            names = Counter(c.name for _, c in failed)
            comment += ": " + ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in names.most_common())
        details: dict[str, Any] = {
            "executions": len(executed),
            "failed": [{"name": c.name, "error": c.error} for _, c in failed[:20]],
        }
        return Score(value, comment[:300], details)

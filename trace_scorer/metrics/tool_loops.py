"""ToolLoops: 1 when the agent repeated an identical call (same tool, same arguments) more than
``max_repeats`` times, else 0 (docs/metrics.md; no reference, no LLM). Lower is better; its mean over a
run is the share of traces that looped.

Identical means equal names and equal arguments as JSON values (key order does not matter). Repeats are
counted over the whole trace, not only back to back: an agent alternating two calls loops too. A trace
that made no call has no loop (0); one whose calls are unknown is skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from trace_scorer.data.outcomes import Outcome, Score
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample


class ToolLoopsOptions(MetricOptions):
    """Options of ``tool_loops``."""

    #: How many identical calls are still fine (2: a retry after a transient failure).
    max_repeats: int = Field(default=2, ge=1)


def _key(name: str, arguments: dict[str, Any]) -> str:
    try:
        return name + "\x00" + json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        return name + "\x00" + repr(arguments)


class ToolLoops(Metric[ToolLoopsOptions]):
    key: ClassVar[str] = "tool_loops"
    description: ClassVar[str] = "1 when an identical tool call was repeated more than max_repeats times"
    Options = ToolLoopsOptions
    requires: ClassVar[tuple[str, ...]] = ("tool_calls",)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        calls = sample.tool_calls or []
        counts = Counter(_key(c.name, c.arguments) for c in calls)
        names = {_key(c.name, c.arguments): c.name for c in calls}
        loops = [(names[key], n) for key, n in counts.most_common() if n > self.options.max_repeats]
        if not loops:
            return Score(0.0, f"no call repeated more than {self.options.max_repeats} times ({len(calls)} calls)")
        comment = "repeated identical calls: " + ", ".join(f"{name} ×{n}" for name, n in loops)
        return Score(1.0, comment[:300], {"loops": [{"name": name, "count": n} for name, n in loops[:20]]})

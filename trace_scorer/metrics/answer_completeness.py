"""AnswerCompleteness: 1 when the trace ends with a final answer that was not cut off, else 0 with the
reason (docs/metrics.md; no reference, no LLM).

Not complete: the last generation stopped on its token limit (finish reason ``length``, ``max_tokens``,
``MAX_TOKENS``, ``max_output_tokens``) or was filtered (``content_filter``, ``SAFETY``); the answer is
empty; the conversation's last message is an assistant's tool call with no text (the agent stopped
mid-way). Requires ``response`` (absent when the trace is not finished or was read without its
input/output: skipped; ``""`` when a finished trace has no answer: 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from trace_scorer.data.outcomes import Outcome, Score
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample

TRUNCATED: Final = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})
FILTERED: Final = frozenset({"content_filter", "safety", "recitation", "blocklist", "prohibited_content"})


class AnswerCompleteness(Metric[MetricOptions]):
    key: ClassVar[str] = "answer_completeness"
    description: ClassVar[str] = "1 when a final answer is present and was not cut off"
    requires: ClassVar[tuple[str, ...]] = ("response",)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        reason = (sample.finish_reason or "").lower()
        if reason in TRUNCATED:
            return Score(0.0, f"the answer was cut off (finish reason {sample.finish_reason})")
        if reason in FILTERED:
            return Score(0.0, f"the answer was filtered (finish reason {sample.finish_reason})")
        if (sample.response or "").strip():
            return Score(1.0, "a final answer, not cut off")
        last = sample.messages[-1] if sample.messages else None
        if last is not None and last.role == "assistant" and last.tool_calls:
            return Score(0.0, "the trace ends on a tool call, with no answer")
        return Score(0.0, "the final answer is empty")

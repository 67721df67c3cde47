"""AnswerCompleteness: 1 when the trace ends with a final answer that was not cut off, else 0 with the
reason (docs/metrics.md; no reference, no LLM).

Not complete: the last generation stopped on its token limit (finish reason ``length``, ``max_tokens``,
``MAX_TOKENS``, ``max_output_tokens``) or was filtered (``content_filter``, ``SAFETY``); the answer is
empty; the conversation's last message is an assistant's tool call with no text (the agent stopped
mid-way). Skipped when the trace tells neither an answer nor a conversation (not fetched, not finished).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput, Outcome, Score, Skipped
from trace_scorer.sample import Sample

TRUNCATED: Final = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})
FILTERED: Final = frozenset({"content_filter", "safety", "recitation", "blocklist", "prohibited_content"})


class AnswerCompleteness(Metric[MetricOptions]):
    key: ClassVar[str] = "answer_completeness"
    description: ClassVar[str] = "1 when a final answer is present and was not cut off"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        if sample.response is None and sample.messages is None:
            return Skipped("the trace has neither a final answer nor a conversation")
        reason = (sample.finish_reason or "").lower()
        if reason in TRUNCATED:
            return Score(0.0, f"the answer was cut off (finish reason {sample.finish_reason})")
        if reason in FILTERED:
            return Score(0.0, f"the answer was filtered (finish reason {sample.finish_reason})")
        last = sample.messages[-1] if sample.messages else None
        answer = sample.response
        if answer is None and last is not None and last.role == "assistant":
            answer = last.content
        ends_on_call = last is not None and last.role == "assistant" and last.tool_calls and not last.content.strip()
        if ends_on_call and not (sample.response or "").strip():
            return Score(0.0, "the trace ends on a tool call, with no answer")
        if not (answer or "").strip():
            return Score(0.0, "the final answer is empty")
        return Score(1.0, "a final answer, not cut off")

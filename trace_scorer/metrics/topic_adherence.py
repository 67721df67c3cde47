"""TopicAdherence (``topic_adherence``, LLM-judged): does the conversation stay within the allowed topics?

docs/metrics.md "topic_adherence". One call per model both extracts the conversation's topics, classifying
each as within the reference topics or not, and says for each reference topic whether it is covered.
Per model: precision = on-topic extracted / extracted, recall = covered reference / reference topics,
F1 their harmonic mean (0 when both are 0); ``mode`` picks which one is the value; value = mean over models.

Decisions (also in docs/metrics.md):
- Reference topics come from the sample (item metadata) when it has them, else from the ``reference_topics``
  option (a fixed list in the target's config); absent or empty → skipped.
- The judge must return every reference topic exactly once (matched case- and space-insensitively);
  otherwise the answer does not validate and it is asked again. The schema sent says so too (the topics
  as an enum, as many items as topics: :func:`answer_schema`), so a grammar-constrained server keeps to it.
- Extracted topics repeated in one answer count once.
- A model that extracts no topics gives no value (named in the details); when no model extracts any,
  the sample is skipped with that reason.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from trace_scorer.data.outcomes import Outcome, Skipped
from trace_scorer.judge.panel import (
    ModelSession,
    ModelVerdict,
    PanelResult,
    ask_panel,
    short_model,
    value_comment,
)
from trace_scorer.judge.prompts import TOPICS, topic_list
from trace_scorer.judge.structured import strict_json_schema
from trace_scorer.metrics._judged import JudgedMetric, JudgedOptions, panel_outcome
from trace_scorer.metrics.base import MetricOutput
from trace_scorer.sample import Sample

Mode = Literal["f1", "precision", "recall"]


def normalise_topic(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".;:,!?\"'«»").strip().casefold()


class ExtractedTopic(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1)
    on_topic: bool


class ReferenceCoverage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    topic: str
    covered: bool


class TopicAnswer(BaseModel):
    """The judge's answer; validated against the reference topics passed as validation context."""

    model_config = ConfigDict(extra="forbid")

    topics: list[ExtractedTopic]
    reference_topics: list[ReferenceCoverage]

    @field_validator("topics")
    @classmethod
    def _distinct(cls, topics: list[ExtractedTopic]) -> list[ExtractedTopic]:
        seen: set[str] = set()
        unique = []
        for item in topics:
            key = normalise_topic(item.topic)
            if key and key not in seen:
                seen.add(key)
                unique.append(item)
        return unique

    @model_validator(mode="after")
    def _every_reference_topic_once(self, info: ValidationInfo) -> TopicAnswer:
        expected = (info.context or {}).get("reference_topics")
        if expected is None:
            return self
        wanted = {normalise_topic(t): t for t in expected}
        got = [normalise_topic(r.topic) for r in self.reference_topics]
        missing = [wanted[k] for k in wanted if k not in got]
        pairs = list(zip(self.reference_topics, got, strict=True))
        unknown = [r.topic for r, k in pairs if k not in wanted]
        repeated = sorted({r.topic for r, k in pairs if got.count(k) > 1})
        problems = []
        if missing:
            problems.append(f"reference_topics lacks {missing}")
        if unknown:
            problems.append(f"reference_topics has topics that are not reference topics: {unknown}")
        if repeated:
            problems.append(f"reference_topics repeats {repeated}")
        if problems:
            raise ValueError("; ".join(problems) + f" (list each of {list(expected)} once, exactly as given)")
        return self


def answer_schema(reference: list[str]) -> dict[str, Any]:
    """TopicAnswer's closed JSON schema with this sample's constraints: ``reference_topics`` lists each
    reference topic (an enum of them), as many items as there are topics; an extracted topic is non-empty."""
    schema = copy.deepcopy(strict_json_schema(TopicAnswer))
    coverage = schema["$defs"]["ReferenceCoverage"]
    coverage["properties"]["topic"] = {"type": "string", "enum": list(reference)}
    listed = schema["properties"]["reference_topics"]
    listed["minItems"] = listed["maxItems"] = len(reference)
    return schema


class TopicAdherenceOptions(JudgedOptions):
    mode: Mode = "f1"
    #: A fixed list of allowed topics, used for samples that bring none of their own.
    reference_topics: list[str] | None = None

    @field_validator("reference_topics")
    @classmethod
    def _non_blank(cls, topics: list[str] | None) -> list[str] | None:
        if topics is not None and any(not t.strip() for t in topics):
            raise ValueError("a reference topic cannot be blank")
        return topics


def scores(answer: TopicAnswer) -> dict[str, float] | None:
    """precision, recall and F1 of one model's answer (None when it extracted no topics)."""
    if not answer.topics:
        return None
    precision = sum(t.on_topic for t in answer.topics) / len(answer.topics)
    recall = sum(r.covered for r in answer.reference_topics) / len(answer.reference_topics)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


class TopicAdherence(JudgedMetric[TopicAdherenceOptions]):
    key = "topic_adherence"
    description = "LLM judges: share of the conversation's topics within the reference topics (and coverage)."
    Options = TopicAdherenceOptions
    requires = ("messages",)
    prompts = (TOPICS,)

    def reference_topics(self, sample: Sample) -> list[str] | None:
        if sample.reference_topics is not None:
            return sample.reference_topics
        return self.options.reference_topics

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        reference = self.reference_topics(sample)
        if reference is None:
            return Skipped("reference_topics absent (neither in the sample nor in the metric's options)")
        reference = list(dict.fromkeys(t.strip() for t in reference if t.strip()))
        if not reference:
            return Skipped("reference_topics is empty")
        if not sample.messages:
            return Skipped("the conversation has no messages")
        judge = self.judge
        data = {"conversation": judge.render(sample), "reference_topics": topic_list(reference)}
        mode = self.options.mode
        schema = answer_schema(reference)

        async def per_model(session: ModelSession) -> ModelVerdict:
            context = {"reference_topics": reference}
            answer = (
                await session.ask(TOPICS, schema=TopicAnswer, data=data, context=context, json_schema=schema)
            ).value
            extra: dict[str, Any] = {
                "topics": [{"topic": t.topic, "on_topic": t.on_topic} for t in answer.topics],
                "reference_coverage": {r.topic: r.covered for r in answer.reference_topics},
            }
            values = scores(answer)
            if values is None:
                return ModelVerdict(None, "no topics", "no topics extracted from the conversation", extra)
            extra.update(values)
            off = [t.topic for t in answer.topics if not t.on_topic]
            reasoning = f"{len(answer.topics) - len(off)}/{len(answer.topics)} topics on-topic"
            if off:
                reasoning += f" (off-topic: {', '.join(off)})"
            return ModelVerdict(values[mode], f"{mode} {values[mode]:.2f}", reasoning, extra)

        async with judge.run(self.name, sample, metadata={"metric": self.key, "mode": mode}) as run:
            result = await ask_panel(judge, run, self.models(), per_model)
            outcome = panel_outcome(
                result,
                run,
                comment=lambda r, value: value_comment(r, what=mode, value=value, summary=_summary(r, reference)),
                details={
                    "mode": mode,
                    "reference_topics": reference,
                    **_means(result),
                    **self.prompt_details(),
                },
                nothing_to_score="no topics extracted from the conversation",
            )
        return outcome


def _means(result: PanelResult) -> dict[str, float]:
    rows = [v.extra for v in result.verdicts.values() if v.value is not None]
    if not rows:
        return {}
    return {k: sum(r[k] for r in rows) / len(rows) for k in ("precision", "recall", "f1")}


def _summary(result: PanelResult, reference: list[str]) -> str:
    """Off-topic topics (any model), reference topics most models found uncovered, per-model values."""
    rows = [(m, v) for m, v in result.verdicts.items() if v.value is not None]
    off = list(dict.fromkeys(t["topic"] for _, v in rows for t in v.extra["topics"] if not t["on_topic"]))
    uncovered = []
    for topic in reference:
        key = normalise_topic(topic)
        votes = [
            covered
            for _, v in rows
            for name, covered in v.extra["reference_coverage"].items()
            if normalise_topic(name) == key
        ]
        if votes and sum(not c for c in votes) * 2 > len(votes):
            uncovered.append(topic)
    parts = []
    if off:
        parts.append("off-topic: " + ", ".join(off[:5]) + (" …" if len(off) > 5 else ""))
    if uncovered:
        parts.append("not covered: " + ", ".join(uncovered[:5]) + (" …" if len(uncovered) > 5 else ""))
    if not parts:
        parts.append("all topics on-topic, every reference topic covered")
    text = "; ".join(parts)
    if len(rows) > 1:
        text += " [" + ", ".join(f"{short_model(m)}: {v.value:.2f}" for m, v in rows) + "]"
    return text

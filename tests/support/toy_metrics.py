"""Toy metrics that exercise the registry, dependencies and group metrics."""

from __future__ import annotations

from collections.abc import Mapping

from trace_scorer.metrics.base import GroupInput, Metric, MetricOptions, MetricOutput, Outcome, Score, Skipped
from trace_scorer.sample import Sample


class ConstantOptions(MetricOptions):
    field: str = "x"


class MetadataValue(Metric[ConstantOptions]):
    """Toy per-sample metric: the value stored in ``sample.metadata[field]`` (skipped when absent)."""

    key = "toy_metadata_value"
    Options = ConstantOptions

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        if self.options.field not in sample.metadata:
            return Skipped(f"metadata.{self.options.field} absent")
        return Score(float(sample.metadata[self.options.field]), "from metadata")


class ReaderOptions(MetricOptions):
    source: str


class Halved(Metric[ReaderOptions]):
    """Toy per-sample metric reading another metric's result: half of it."""

    key = "toy_halved"
    Options = ReaderOptions

    def reads(self) -> tuple[str, ...]:
        return (self.options.source,)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        source = inputs[self.options.source]
        if not isinstance(source, Score):
            return Skipped(f"{self.options.source} has no value")
        return Score(source.value / 2, "half")


class ShareAbove(Metric[ReaderOptions]):
    """Toy per-group metric: the share of the group's samples whose ``source`` is ≥ 0.5."""

    key = "toy_share_above"
    Options = ReaderOptions
    per_group = True

    def reads(self) -> tuple[str, ...]:
        return (self.options.source,)

    def output_names(self) -> tuple[str, ...]:
        return (self.name, f"{self.name}_n")

    async def score_group(self, group: GroupInput) -> MetricOutput:
        values = [r[self.options.source] for r in group.results]
        scored = [v.value for v in values if isinstance(v, Score)]
        if not scored:
            return Skipped("nothing scored")
        share = sum(v >= 0.5 for v in scored) / len(scored)
        return {self.name: Score(share), f"{self.name}_n": Score(len(scored) / 100)}


class Exploding(Metric[MetricOptions]):
    key = "toy_exploding"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        raise RuntimeError("boom")


class OutOfRange(Metric[MetricOptions]):
    key = "toy_out_of_range"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return Score(1.5)


class NeedsJudge(Metric[MetricOptions]):
    key = "toy_needs_judge"
    needs = ("judge",)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        return Score(1.0)


TOY_METRICS = (MetadataValue, Halved, ShareAbove, Exploding, OutOfRange, NeedsJudge)

"""Reading and scoring a part of the input in this process: the one scorer of every file command.

A part (``read.FilePart``) is a range of JSON lines or a whole file. Its records are read, validated and
scored one by one, so that what is not kept dies young (the garbage collector's work stays small: it was
a third of the time when a part's samples were all read first). Exported observation rows and experiment
items are only collected here: a trace's rows may be anywhere in the input, so they are extracted once
everything is read (``scoring.score_files``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from trace_scorer.data.outcomes import Failed, Score
from trace_scorer.metrics.registry import MetricClass
from trace_scorer.offline.read import FilePart, ReadError, Record, samples_of
from trace_scorer.offline.report import sample_json_line, sample_notes
from trace_scorer.offline.targets import has_inputs
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline, SampleResult
from trace_scorer.scoring.plan import TargetPlan

#: What a part keeps of each sample's result: nothing (its JSON line is enough), what the table and the
#: JSON lines show (id, notes, values and reasons), or everything (groups, judges' details, compare).
Keep = Literal["none", "shown", "all"]


@dataclass
class PartResult:
    """What reading and scoring one part gave, in input order."""

    samples: int = 0
    results: list[SampleResult] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    #: Observation rows and experiment items: extracted once everything is read.
    records: list[Record] = field(default_factory=list)
    #: Keys of the candidate metrics whose inputs some sample of the part has (without configuration).
    present: set[str] = field(default_factory=set)
    size: int = 0


#: The sample a shown result keeps: its id and notes are set per result (``model_copy``), every other
#: field stays at its default. Built once: ``model_construct`` fills 22 defaults, calling pydantic's
#: default-factory inspection for each (4 s profiled over 30,000 samples), a copy does not.
_BLANK = Sample.model_construct(id="")


def _shown(result: SampleResult) -> SampleResult:
    """The result without what no output shows (the sample's fields, comments, details): lighter to keep
    for the table and to send between processes."""
    outcomes = {
        name: Score(o.value) if isinstance(o, Score) else Failed(o.reason) if isinstance(o, Failed) else o
        for name, o in result.outcomes.items()
    }
    sample = _BLANK.model_copy(update={"id": result.sample.id, "notes": sample_notes(result)})  # with what was cut
    return SampleResult(sample, outcomes, result.kpi_names)


@dataclass
class PartScorer:
    """Reads parts and scores their samples with one plan, in this process, ``concurrency`` at a time
    (more than one only for metrics that wait on the network: judges, embedders)."""

    plan: TargetPlan
    keep: Keep
    #: Write each sample's JSON line while scoring (the output is JSON and its metrics are settled).
    render: bool
    candidates: Sequence[MetricClass] = ()
    concurrency: int = 1

    def __post_init__(self) -> None:
        self.pipeline = Pipeline(self.plan)
        if self.keep != "all":  # no output shows the comments and details of what is not kept whole
            for metric in self.plan.sample_metrics:
                metric.explain = False

    def read(self, part: FilePart, out: PartResult) -> Iterator[Sample]:
        """The part's samples, one at a time; what could not be read goes to ``out.errors``, rows and
        items to ``out.records``."""
        return samples_of(part.records(), out.errors, out.records)

    async def score_part(self, part: FilePart) -> PartResult:
        out = PartResult(size=part.size)
        return await self.score_samples(self.read(part, out), out)

    async def score_samples(self, samples: Iterable[Sample], out: PartResult) -> PartResult:
        if self.concurrency > 1:
            async for result in self.pipeline.score_samples(samples, concurrency=self.concurrency):
                self.add(result, out)
            return out
        score = self.pipeline.score_sample
        for sample in samples:  # one at a time: no task per sample
            self.add(await score(sample), out)
        return out

    def add(self, result: SampleResult, out: PartResult) -> None:
        out.samples += 1
        sample = result.sample
        for cls in self.candidates:
            if cls.key not in out.present and has_inputs(cls, sample):
                out.present.add(cls.key)
        if self.render:
            out.lines.append(sample_json_line(result))
        if self.keep == "all":
            out.results.append(result)
        elif self.keep == "shown":
            out.results.append(_shown(result))

"""What a metric is: its declared options, inputs and kind, and what it returns.

A metric is a pure function of a Sample (per-sample) or of a group of samples (per-group), plus the
shared resources it declares (a judge, an embedder). It returns a :class:`Score`, a :class:`Skipped`
(inputs absent or not applicable: not a failure, nothing posted) or a :class:`Failed` (it should have
produced a value but could not, e.g. every judge model was down: retried on a later run).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from trace_scorer.config.common import refuse_booleans_for_numbers
from trace_scorer.data.outcomes import DataType, Failed, Outcome, Score, Skipped
from trace_scorer.sample import Sample

if TYPE_CHECKING:  # types only: importing trace_scorer.embeddings loads its builders
    from trace_scorer.embeddings.base import Embedder
    from trace_scorer.judge.definition import JudgeDefinition

__all__ = [
    "Failed",
    "GroupInput",
    "JudgeResource",
    "Metric",
    "MetricOptions",
    "MetricOutput",
    "Outcome",
    "Resources",
    "Score",
    "Skipped",
]


#: What a metric returns: one outcome under its own name, or several named ones (e.g. pass@k for each k).
MetricOutput = Outcome | Mapping[str, Outcome]


class MetricOptions(BaseModel):
    """Base of every metric's options: unknown keys are configuration errors, and so is a boolean for a
    number (``strictness = true`` is not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data: Any) -> Any:
        return refuse_booleans_for_numbers(cls, data)


@dataclass(frozen=True)
class GroupInput:
    """A group of samples (a dataset run, the attempts at one question) with their per-sample results."""

    key: str
    samples: Sequence[Sample]
    results: Sequence[Mapping[str, Outcome]]
    #: Group-level results computed so far: run-level means of per-sample metrics, earlier group metrics.
    aggregates: Mapping[str, Outcome] = field(default_factory=dict)


R = TypeVar("R")


class JudgeResource(Protocol):
    """What the metric layer asks of ``Resources.judge`` (``trace_scorer.judge.Judge`` is one)."""

    def bounded(self, work: Awaitable[R], on_timeout: Callable[[Any], R] | None = None) -> Awaitable[R]:
        """``await work`` (one judged metric on one sample) within the judge's ``metric_deadline``; when it
        runs out, ``on_timeout`` of the judge's timeout error (without it, the error is raised)."""
        ...


@dataclass
class Resources:
    """Shared services a metric may declare a need for (see ``Metric.needs``).

    ``judge`` is the LLM judge (trace_scorer.judge), ``embedder`` the embedding models
    (trace_scorer.embeddings: an ``Embedder``, built by ``build_embedder``). They are
    ``None`` when not configured; the pipeline then skips the metrics that need them, with a reason.
    ``resources.py`` opens them as their concrete types (``OpenResources``).
    """

    judge: JudgeResource | None = None
    embedder: Embedder | None = None
    #: Langfuse's evaluators by name (``llm_judge`` with ``evaluator = "langfuse:NAME"``), loaded at
    #: start-up when a target names one; None: not loaded.
    evaluators: Mapping[str, JudgeDefinition] | None = None


OptionsT = TypeVar("OptionsT", bound=MetricOptions)


class Metric(ABC, Generic[OptionsT]):
    """Base of every metric. Subclasses set the class attributes and override one ``score*`` method.

    Class attributes:
      key: registry name (``tool_call_accuracy``).
      Options: pydantic model of the options (validated at start-up).
      requires: Sample fields that must not be ``None`` (else the sample is skipped with a reason).
      per_group: False for per-sample metrics, True for per-group ones.
      needs: shared resources used: ``"judge"``, ``"embedder"``. Metrics needing none are deterministic.
      version: bump when the computation changes, so the worker re-scores (part of the fingerprint).
      value_range: the (low, high) bounds of its values, ``None`` for no bound; a value outside them is
        ``Failed``. [0, 1] unless declared: trace facts (latency, tokens, cost) are counts and amounts.
    """

    key: ClassVar[str]
    description: ClassVar[str] = ""
    Options: ClassVar[type[MetricOptions]] = MetricOptions
    requires: ClassVar[tuple[str, ...]] = ()
    per_group: ClassVar[bool] = False
    needs: ClassVar[tuple[Literal["judge", "embedder"], ...]] = ()
    version: ClassVar[str] = "1"
    value_range: ClassVar[tuple[float | None, float | None]] = (0.0, 1.0)
    #: False when whoever runs the metric shows neither a score's comment nor its details (``score``'s
    #: JSON lines and table): a metric whose comment and details cost more than its value may then return
    #: the value alone (``tool_call_accuracy``). The worker, which posts both, leaves it True.
    explain: bool = True

    def __init__(self, name: str, options: OptionsT, resources: Resources | None = None) -> None:
        self.name = name
        self.options = options
        self.resources = resources or Resources()

    @classmethod
    def deterministic(cls) -> bool:
        return not cls.needs

    def reads(self) -> tuple[str, ...]:
        """Score names of other metrics whose results this one reads (on the same sample or group)."""
        return ()

    def output_names(self) -> tuple[str, ...]:
        """The score names this metric produces (its configured name unless it returns several)."""
        return (self.name,)

    def bounds(self) -> tuple[float | None, float | None]:
        """The bounds of this configured metric's values: ``value_range`` unless its options set them."""
        return self.value_range

    def score_type(self) -> tuple[DataType, tuple[str, ...]]:
        """The Langfuse data type of its scores and, for CATEGORICAL, the categories (value = position)."""
        return "NUMERIC", ()

    def check(self) -> None:
        """Validate this metric against its resources once, at start-up (e.g. judge model names exist).

        The plan builder calls it once after building the metric; raise ValueError with a message for the
        user, reported as a configuration error naming the metric. A resource that is not configured is
        not an error here (the pipeline skips the metric with its own message). Default: nothing to check.
        """

    def fingerprint_parts(self) -> dict[str, Any]:
        """What identifies this metric's computation; LLM metrics add their prompt version."""
        return {"key": self.key, "version": self.version, "options": self.options.model_dump(mode="json")}

    def fingerprint(self) -> str:
        blob = json.dumps(self.fingerprint_parts(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def missing_inputs(self, sample: Sample) -> list[str]:
        return [name for name in self.requires if getattr(sample, name) is None]

    def run(self, sample: Sample, inputs: Mapping[str, Outcome]) -> Awaitable[MetricOutput]:
        """:meth:`score` as the pipeline calls it: a metric that needs the judge within the judge's
        per-sample deadline (``metrics/_judged.py``: ``within_deadline``), any other as it is. The
        awaitable to await, not a coroutine of its own: one layer less for every resume of the task."""
        if "judge" in self.needs and self.resources.judge is not None:
            from trace_scorer.metrics._judged import within_deadline  # it imports this module

            return within_deadline(self, sample, inputs)
        return self.score(sample, inputs)

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        """Per-sample metrics: score one sample. ``inputs`` holds the results named by ``reads()``."""
        raise NotImplementedError(f"{type(self).__name__} is a per-group metric")

    async def score_group(self, group: GroupInput) -> MetricOutput:
        """Per-group metrics: score a group of samples with their per-sample results."""
        raise NotImplementedError(f"{type(self).__name__} is a per-sample metric")

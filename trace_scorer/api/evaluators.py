"""Evaluators for the Langfuse SDK's ``run_experiment`` (docs/python-api.md): trace-scorer's metrics as
item-level evaluators returning the SDK's ``Evaluation``, and run-level ones for means, group metrics
(pass@k) and KPIs.

Why here and not in ``langfuse/``: that package is the worker's wire format and never imports metrics;
this is an adapter from the SDK's calling convention to :mod:`trace_scorer.api.scoring`. The SDK is imported
when an evaluator runs, so ``import trace_scorer.api.evaluators`` stays cheap.

How an experiment item becomes a :class:`Sample` (``to_sample``; pass ``sample=`` to read another shape):

- ``input``: a string is the user's message; a list is the conversation's messages; a mapping holds
  sample fields (``messages``, ``reference_tool_calls``…).
- ``output`` (what the task returned): a string is the final ``response``; a mapping holds sample fields
  (``response``, ``tool_calls``, ``messages``).
- ``expected_output``: a string is ``expected`` (the expected answer); a mapping holds sample fields
  (``reference``, ``reference_tool_calls``, ``reference_topics``…).
- ``metadata`` is the sample's metadata; its ``item_id`` (else the dataset item's id, else the input
  itself) says which attempts answer one question, for pass@k.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from trace_scorer.api.scoring import JudgeConfig, MetricSpec, ascore, target
from trace_scorer.config.settings import Settings
from trace_scorer.data.outcomes import Failed, Outcome, Score
from trace_scorer.metrics.registry import MetricRegistry
from trace_scorer.sample import Sample

if TYPE_CHECKING:
    from langfuse.experiment import Evaluation, ExperimentItemResult

log = structlog.get_logger(__name__)

__all__ = ["EvaluationFailed", "langfuse_evaluator", "langfuse_run_evaluator", "to_sample"]

#: Reads one experiment item (input, output, expected_output, metadata) into a sample (or its fields).
SampleReader = Callable[[Any, Any, Any, Mapping[str, Any] | None], Sample | Mapping[str, Any]]


class EvaluationFailed(RuntimeError):
    """Every score of the evaluator failed (e.g. the judge did not answer): raised, so the SDK counts the
    evaluator as failed for the item instead of recording a made-up value."""


def _fields(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def to_sample(input: Any, output: Any, expected_output: Any, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sample fields of one experiment item (the rules in the module's docstring)."""
    fields: dict[str, Any] = {}
    if isinstance(input, str):
        fields["messages"] = [{"role": "user", "content": input}]
    elif isinstance(input, list):
        fields["messages"] = list(input)
    else:
        fields.update(_fields(input))
    if isinstance(expected_output, str):
        fields["expected"] = expected_output
    else:
        fields.update(_fields(expected_output))
    if isinstance(output, str):
        fields["response"] = output
    else:
        fields.update(_fields(output))
    if metadata:
        fields["metadata"] = {**dict(metadata), **fields.get("metadata", {})}
    return fields


def _evaluations(outcomes: Mapping[str, Outcome], names: Sequence[str]) -> list[Evaluation]:
    """Scores as Evaluations; skipped ones left out (nothing to record, as the worker posts nothing);
    raises EvaluationFailed when something failed and nothing scored."""
    from langfuse.experiment import Evaluation

    evaluations = []
    failures = []
    for name in names:
        outcome = outcomes.get(name)
        if isinstance(outcome, Score):
            metadata = {"details": outcome.details} if outcome.details else None
            evaluations.append(Evaluation(name=name, value=outcome.value, comment=outcome.comment, metadata=metadata))
        elif isinstance(outcome, Failed):
            failures.append(f"{name}: {outcome.reason}")
    if failures and not evaluations:
        raise EvaluationFailed("; ".join(failures))
    for failure in failures:
        log.warning("evaluation_failed", failure=failure)
    return evaluations


class _Common:
    """What both evaluators are configured with."""

    def __init__(
        self,
        metrics: Sequence[MetricSpec],
        *,
        kpis: Sequence[Mapping[str, Any]],
        judge: JudgeConfig | None,
        settings: Settings | None,
        registry: MetricRegistry | None,
        sample: SampleReader | None,
        group_by: str | None,
    ) -> None:
        self.metrics = list(metrics)
        self.kpis = list(kpis)
        self.judge = judge
        self.settings = settings
        self.registry = registry
        self.read = sample or to_sample
        # The target is checked now, so a misspelt metric fails where the evaluator is made.
        self.target = target(self.metrics, kpis=self.kpis, group_by=group_by)
        from trace_scorer.metrics.base import Resources
        from trace_scorer.metrics.registry import default_registry
        from trace_scorer.scoring.plan import build_plan

        self.plan = build_plan(self.target, index=0, registry=registry or default_registry(), resources=Resources())

    def sample(
        self, input: Any, output: Any, expected_output: Any, metadata: Any, **ids: Any
    ) -> Sample | dict[str, Any]:
        read = self.read(input, output, expected_output, metadata if isinstance(metadata, Mapping) else None)
        if isinstance(read, Sample):
            return read.model_copy(update={k: v for k, v in ids.items() if getattr(read, k) is None})
        return {**{k: v for k, v in ids.items() if v is not None}, **read}


class ItemEvaluator(_Common):
    """An item-level evaluator: ``(*, input, output, expected_output, metadata) -> list[Evaluation]``."""

    def __init__(self, *args: Any, name: str, **kwargs: Any) -> None:
        super().__init__(*args, group_by=None, **kwargs)
        self.__name__ = name

    async def __call__(
        self, *, input: Any, output: Any, expected_output: Any = None, metadata: Any = None, **_: Any
    ) -> list[Evaluation]:
        sample = self.sample(input, output, expected_output, metadata, id="item")
        results = await ascore(
            [sample], self.metrics, kpis=self.kpis, judge=self.judge, settings=self.settings, registry=self.registry
        )
        result = results.samples[0]
        names = [*self.plan.sample_score_names(), *(k.name for k in self.plan.sample_kpis)]
        return _evaluations(result.outcomes, names)


class RunEvaluator(_Common):
    """A run-level evaluator: ``(*, item_results) -> list[Evaluation]`` over the whole run as one group."""

    def __init__(self, *args: Any, name: str, **kwargs: Any) -> None:
        super().__init__(*args, group_by="*", **kwargs)
        self.__name__ = name

    async def __call__(self, *, item_results: Sequence[ExperimentItemResult], **_: Any) -> list[Evaluation]:
        samples = []
        for position, item_result in enumerate(item_results):
            item = item_result.item
            if isinstance(item, Mapping):
                input, expected, metadata, item_id = (
                    item.get("input"),
                    item.get("expected_output"),
                    item.get("metadata"),
                    None,
                )
            else:  # a Langfuse DatasetItem
                input, expected, metadata = item.input, item.expected_output, item.metadata
                item_id = item.id
            if isinstance(metadata, Mapping) and metadata.get("item_id") is not None:
                item_id = str(metadata["item_id"])
            if item_id is None:  # local data: the attempts at one question share its input
                item_id = json.dumps(input, sort_keys=True, default=str, ensure_ascii=False)
            samples.append(
                self.sample(
                    input,
                    item_result.output,
                    expected,
                    metadata,
                    id=item_result.trace_id or f"item-{position}",
                    trace_id=item_result.trace_id,
                    item_id=item_id,
                )
            )
        results = await ascore(
            samples,
            self.metrics,
            kpis=self.kpis,
            group_by="*",
            judge=self.judge,
            settings=self.settings,
            registry=self.registry,
        )
        if not results.groups:
            return []
        names = [
            *self.plan.sample_score_names(),
            *self.plan.group_score_names(),
            *(k.name for k in self.plan.group_kpis),
        ]
        return _evaluations(results.groups[0].outcomes, names)


def langfuse_evaluator(
    *metrics: MetricSpec,
    kpis: Sequence[Mapping[str, Any]] = (),
    judge: JudgeConfig | None = None,
    settings: Settings | None = None,
    registry: MetricRegistry | None = None,
    sample: SampleReader | None = None,
    name: str | None = None,
) -> ItemEvaluator:
    """An item-level evaluator for ``Langfuse.run_experiment(evaluators=[...])``: one ``Evaluation`` per
    score of ``metrics`` (and per-sample ``kpis``); skipped ones are left out; when every score failed
    it raises :class:`EvaluationFailed`. Raises ConfigError now for an unknown metric or a bad option."""
    return ItemEvaluator(
        metrics,
        kpis=kpis,
        judge=judge,
        settings=settings,
        registry=registry,
        sample=sample,
        name=name or "trace_scorer",
    )


def langfuse_run_evaluator(
    *metrics: MetricSpec,
    kpis: Sequence[Mapping[str, Any]] = (),
    judge: JudgeConfig | None = None,
    settings: Settings | None = None,
    registry: MetricRegistry | None = None,
    sample: SampleReader | None = None,
    name: str | None = None,
) -> RunEvaluator:
    """A run-level evaluator for ``Langfuse.run_experiment(run_evaluators=[...])``: the run's mean of each
    per-sample metric, the group metrics (``pass_at_k``: attempts at one question share ``item_id``) and
    the ``kpis``, each an ``Evaluation`` the SDK stores as a score of the run."""
    return RunEvaluator(
        metrics,
        kpis=kpis,
        judge=judge,
        settings=settings,
        registry=registry,
        sample=sample,
        name=name or "trace_scorer_run",
    )

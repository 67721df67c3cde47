"""The base of the judged metrics: the ``models`` option, its start-up check, the fingerprint, and the
outcome of a panel of judge models (:func:`panel_outcome`), and the judge's per-sample deadline
(:func:`within_deadline`, what ``Metric.run`` calls for every metric that needs the judge).

A judged metric's fingerprint carries the versions of the prompts it uses and what of the judge's
configuration changes its answers (the models it runs on, the language, temperature, max tokens and
truncation), so any of those changing makes the worker re-score.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from statistics import fmean
from typing import Any, ClassVar, Literal, TypeVar

import structlog
from pydantic import field_validator

from trace_scorer.data.outcomes import Failed, Outcome, Score, Skipped
from trace_scorer.judge.judge import Judge, JudgeRun, JudgeTimeout
from trace_scorer.judge.panel import PanelResult
from trace_scorer.judge.prompts import PromptTemplate
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample

log = structlog.get_logger(__name__)


def within_deadline(metric: Metric[Any], sample: Sample, inputs: Mapping[str, Outcome]) -> Awaitable[MetricOutput]:
    """``metric.score`` within the judge's ``[judge] metric_deadline``: one that runs out is a Failed
    ("judge did not answer within …", logged as ``judge_timeout`` with the models still being asked), so a
    hanging judge never holds the batch's other scores back, and the worker's retry path scores it later.

    The judge's own coroutine, returned to await (``Judge.bounded`` turns the timeout into the Failed): a
    coroutine here would be one more layer every resume of the metric's task runs through."""
    judge = metric.resources.judge
    if not isinstance(judge, Judge):
        return metric.score(sample, inputs)
    return judge.bounded(metric.score(sample, inputs), partial(_timed_out, metric, sample))


def _timed_out(metric: Metric[Any], sample: Sample, exc: JudgeTimeout) -> MetricOutput:
    log.warning(
        "judge_timeout",
        metric=metric.name,
        sample=sample.id,
        trace_id=sample.trace_id,
        models=list(exc.models),
        deadline_seconds=exc.seconds,
    )
    return Failed(str(exc))


class JudgedOptions(MetricOptions):
    """Options every judged metric has."""

    #: Judge models to run on, as ``provider/model-id``; None: every configured chat model.
    models: list[str] | None = None

    @field_validator("models")
    @classmethod
    def _models_listed_once(cls, models: list[str] | None) -> list[str] | None:
        if models is None:
            return None
        if not models:
            raise ValueError("models cannot be empty: leave it out to use every configured chat model")
        if len(set(models)) != len(models):
            raise ValueError("a model is listed twice in models")
        return models


JudgedOptionsT = TypeVar("JudgedOptionsT", bound=JudgedOptions)


class JudgedMetric(Metric[JudgedOptionsT]):
    """A metric answered by a panel of judge models (see trace_scorer.judge.panel)."""

    needs: ClassVar[tuple[Literal["judge", "embedder"], ...]] = ("judge",)
    #: The prompts this metric asks; their versions are part of the fingerprint.
    prompts: ClassVar[tuple[PromptTemplate, ...]] = ()

    @property
    def judge(self) -> Judge:
        judge = self.resources.judge
        if not isinstance(judge, Judge):
            raise RuntimeError(f"metric {self.name!r} needs a judge and none is configured")
        return judge

    def models(self) -> tuple[str, ...]:
        return self.judge.resolve_models(self.options.models)

    def check(self) -> None:
        """Every model named in ``models`` is a configured chat model (ValueError otherwise)."""
        if isinstance(self.resources.judge, Judge):
            self.models()

    def fingerprint_parts(self) -> dict[str, Any]:
        parts = super().fingerprint_parts()
        parts["prompts"] = {t.id: t.full_version for t in self.prompts}
        if isinstance(self.resources.judge, Judge):
            parts["judge"] = self.resources.judge.fingerprint_parts(self.models())
        return parts

    def prompt_details(self) -> dict[str, Any]:
        """The details every judged score carries: prompt versions and language."""
        return {
            "prompt_version": {t.id: t.full_version for t in self.prompts},
            "language": self.judge.language,
        }


def panel_outcome(
    result: PanelResult,
    run: JudgeRun,
    *,
    comment: Callable[[PanelResult, float], str],
    details: Mapping[str, Any],
    nothing_to_score: str = "no model gave a value",
) -> Outcome:
    """Score (mean over models), Failed (every model failed) or Skipped (models answered, no value).

    The outcome is also set as the run's output, so the judge trace in Langfuse shows the conclusion.
    """
    values = result.values()
    full = result.details(details)
    outcome: Outcome
    if values:
        value = fmean(values)
        outcome = Score(value=value, comment=comment(result, value), details=full)
        run.output = {"value": value, "comment": outcome.comment}
    elif result.failures:
        n = len(result.models)
        reasons = "; ".join(f"{m}: {e.message}" for m, e in result.failures.items())
        scope = "the judge model" if n == 1 else f"all {n} judge models"
        outcome = Failed(reason=f"{scope} failed — {reasons}", details=full)
        run.output = {"failed": outcome.reason}
    else:
        outcome = Skipped(nothing_to_score)
        run.output = {"skipped": nothing_to_score}
    return outcome

"""A panel of judge models: run a metric's question on each model concurrently and combine the verdicts.

Shared by every judged metric (docs/metrics.md "LLM-judged metrics"): each model gives its own
verdict, the value is the mean over the models that gave one, a model whose calls fail after the retries
is left out and named in the details, and when every model fails the metric fails for that sample (no
score; the pipeline counts it and a later run retries). Tokens are counted per model, failures included.
Turning a panel's result into a metric outcome is the metrics' side (trace_scorer.metrics._judged).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from trace_scorer.judge.errors import JudgeCallError
from trace_scorer.judge.judge import Answer, Judge, JudgeRun, Tally
from trace_scorer.judge.prompts import PromptTemplate
from trace_scorer.providers.usage import Usage, total

T = TypeVar("T", bound=BaseModel)

COMMENT_MAX_CHARS = 1000
REASON_MAX_CHARS = 240


class ModelSession(Tally):
    """One model's part of a panel: asks go through it so their tokens are counted, failures too."""

    def __init__(self, judge: Judge, run: JudgeRun, model: str) -> None:
        super().__init__()
        self.judge = judge
        self.run = run
        self.model = model

    def ask(self, template: PromptTemplate, *, schema: type[T], **kwargs: Any) -> Awaitable[Answer[T]]:
        """The judge's ask, counted in this session (by :meth:`Judge.ask`: no coroutine layer here)."""
        return self.judge.ask(self.run, self.model, template, schema=schema, tally=self, **kwargs)


@dataclass
class ModelVerdict:
    """One model's verdict: ``value`` None means it answered but had nothing to score (not a failure)."""

    value: float | None
    label: str
    reasoning: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PanelResult:
    models: tuple[str, ...]
    verdicts: dict[str, ModelVerdict]
    failures: dict[str, JudgeCallError]
    usage: dict[str, Usage]
    cached: dict[str, int]
    trace_id: str | None

    def values(self) -> list[float]:
        return [v.value for v in self.verdicts.values() if v.value is not None]

    def details(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        models: dict[str, Any] = {}
        for model, verdict in self.verdicts.items():
            entry: dict[str, Any] = {"verdict": verdict.label, "reasoning": verdict.reasoning}
            if verdict.value is not None:
                entry["value"] = verdict.value
            entry.update(verdict.extra)
            entry.update(self.usage[model].as_details())
            if self.cached[model]:
                entry["cached_calls"] = self.cached[model]
            models[model] = entry
        failed = {
            model: {"error": exc.message, **self.usage[model].as_details()}
            for model, exc in self.failures.items()
        }
        out: dict[str, Any] = {**extra, "models": models}
        if failed:
            out["failed_models"] = failed
        out.update(total(list(self.usage.values())).as_details())
        if self.trace_id is not None:
            out["judge_trace_id"] = self.trace_id
        return out


async def ask_panel(
    judge: Judge,
    run: JudgeRun,
    models: Sequence[str],
    per_model: Callable[[ModelSession], Awaitable[ModelVerdict]],
) -> PanelResult:
    """Run ``per_model`` for every model at once (the providers' limits bound the traffic)."""
    sessions = [ModelSession(judge, run, model) for model in models]
    results: list[ModelVerdict | BaseException]
    if len(sessions) == 1:  # the usual judge: no task and gather for a panel of one
        try:
            results = [await per_model(sessions[0])]
        except JudgeCallError as exc:
            results = [exc]
    else:
        results = await asyncio.gather(*(per_model(s) for s in sessions), return_exceptions=True)
    verdicts: dict[str, ModelVerdict] = {}
    failures: dict[str, JudgeCallError] = {}
    for session, result in zip(sessions, results, strict=True):
        if isinstance(result, JudgeCallError):
            failures[session.model] = result
        elif isinstance(result, BaseException):
            raise result  # a bug or a cancellation, not a model failure
        else:
            verdicts[session.model] = result
    return PanelResult(
        models=tuple(models),
        verdicts=verdicts,
        failures=failures,
        usage={s.model: s.usage for s in sessions},
        cached={s.model: s.cached for s in sessions},
        trace_id=run.trace_id,
    )


async def gather_votes(session: ModelSession, calls: Sequence[Awaitable[Answer[T]]]) -> list[Answer[T]]:
    """Several asks of one model, all run to the end (so every token is counted); the first failure wins.
    One ask (no vote) runs in the caller's task, as a panel of one model does: no task and gather."""
    if len(calls) == 1:
        return [await calls[0]]
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [r for r in results if not isinstance(r, BaseException)]


def short_model(model: str) -> str:
    return model.rsplit("/", 1)[-1]


_SPACES = re.compile(r"\s+")


def short_reason(text: str, limit: int = REASON_MAX_CHARS) -> str:
    text = _SPACES.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return f"{cut}…"


def _failed_suffix(result: PanelResult) -> str:
    if not result.failures:
        return ""
    return "; failed: " + ", ".join(short_model(m) for m in result.failures)


def _clip(comment: str) -> str:
    return comment if len(comment) <= COMMENT_MAX_CHARS else comment[: COMMENT_MAX_CHARS - 1] + "…"


def binary_comment(result: PanelResult, *, yes: str, no: str) -> str:
    """``2/3 models: goal reached — <reasoning> [a: yes, b: yes, c: no]; failed: d``."""
    answered = [(m, v) for m, v in result.verdicts.items() if v.value is not None]
    positive = [(m, v) for m, v in answered if v.value is not None and v.value >= 0.5]
    negative = [(m, v) for m, v in answered if v.value is not None and v.value < 0.5]
    n = len(answered)
    noun = "model" if n == 1 else "models"
    if len(positive) * 2 >= n:
        lead, reasons = f"{len(positive)}/{n} {noun}: {yes}", positive
    else:
        lead, reasons = f"{len(negative)}/{n} {noun}: {no}", negative
    reasoning = short_reason(reasons[0][1].reasoning) if reasons else ""
    per_model = ", ".join(f"{short_model(m)}: {v.label}" for m, v in answered)
    text = f"{lead} — {reasoning}" if reasoning else lead
    if n > 1:
        text += f" [{per_model}]"
    return _clip(text + _failed_suffix(result))


def value_comment(result: PanelResult, *, what: str, value: float, summary: str) -> str:
    """``f1 0.67 (mean of 2 models) — <summary>; failed: c`` for metrics with graded per-model values."""
    n = len(result.values())
    noun = "model" if n == 1 else "models"
    text = f"{what} {value:.2f} ({'mean of ' if n > 1 else ''}{n} {noun})"
    if summary:
        text += f" — {summary}"
    return _clip(text + _failed_suffix(result))

"""One comparison: a baseline run against a candidate run, metric by metric, on the items both scored.

Per score name: both means with their counts; the mean paired difference (candidate − baseline) over the
items both runs scored, the permutation test's p-value and a bootstrap interval (:mod:`.stats`); Holm's
correction across the compared names, the interval drawn at the confidence level of the score's Holm step
(so an interval clear of zero and the corrected verdict say the same thing); a verdict; the items that
regressed most. Items of one run only are
counted and listed. With repeated attempts: pass@k and pass^k of each run for k = 1…n with intervals.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trace_scorer.compare import stats
from trace_scorer.compare.runs import RunValues
from trace_scorer.errors import UserError
from trace_scorer.metrics.pass_at_k import pass_at_k, pass_hat_k

Verdict = Literal["better", "worse", "no detectable difference", "not compared"]
BETTER: Verdict = "better"
WORSE: Verdict = "worse"
SAME: Verdict = "no detectable difference"
NOT_COMPARED: Verdict = "not compared"

TEST_NAME = "paired permutation test (sign flips) of the mean difference"
INTERVAL_NAME = "paired bootstrap, BCa"


@dataclass(frozen=True)
class PassCriterion:
    """When an attempt counts as correct for pass@k: ``metric >= threshold`` (or ``>``)."""

    metric: str
    threshold: float
    direction: Literal[">=", ">"] = ">="

    def passes(self, value: float) -> bool:
        compare: Callable[[float, float], bool] = operator.ge if self.direction == ">=" else operator.gt
        return compare(value, self.threshold)

    def __str__(self) -> str:
        return f"{self.metric} {self.direction} {self.threshold:g}"

    @classmethod
    def parse(cls, text: str) -> PassCriterion:
        """``NAME>=0.8`` or ``NAME>0.5``."""
        found = re.fullmatch(r"\s*([A-Za-z0-9_.()\- ]+?)\s*(>=|>)\s*([0-9.eE+-]+)\s*", text)
        if found is None:
            raise UserError(f"--pass-when {text!r}: write NAME>=VALUE or NAME>VALUE (e.g. answer_similarity>=0.8)")
        try:
            threshold = float(found.group(3))
        except ValueError:
            raise UserError(f"--pass-when {text!r}: {found.group(3)!r} is not a number") from None
        direction: Literal[">=", ">"] = ">=" if found.group(2) == ">=" else ">"
        return cls(found.group(1), threshold, direction)


class Options(BaseModel):
    """How a comparison is computed (reported with it, so its numbers can be reproduced)."""

    model_config = ConfigDict(frozen=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    confidence: float = stats.CONFIDENCE
    n_resamples: int = stats.N_RESAMPLES
    seed: int = 0
    #: Regressed items listed per score name.
    top: int = 10
    test: str = TEST_NAME
    interval: str = INTERVAL_NAME
    correction: str = "holm"


class Side(BaseModel):
    """One run's mean of a score over its items (each item's attempts averaged first) and the item count."""

    mean: float | None
    items: int


class ItemChange(BaseModel):
    """An item's value in both runs (means over its attempts), with its traces and their links."""

    item: str
    baseline: float
    candidate: float
    difference: float
    baseline_traces: list[str] = Field(default_factory=list)
    candidate_traces: list[str] = Field(default_factory=list)
    baseline_links: list[str] = Field(default_factory=list)
    candidate_links: list[str] = Field(default_factory=list)


class RunLevel(BaseModel):
    """A KPI's run-level value in each run: its formula applied to the run's metric means (what ``score``'s
    groups table and the worker's run score show), which is not the mean of its per-trace values."""

    baseline: float | None
    candidate: float | None


class MetricComparison(BaseModel):
    name: str
    baseline: Side
    candidate: Side
    #: Items both runs scored: the differences, the interval and the test are over these.
    paired: int
    difference: float | None = None
    #: The bootstrap interval of ``difference`` at ``interval_confidence``.
    interval: tuple[float, float] | None = None
    #: The interval's confidence level: 1 − α / (m − rank), the level of the score's Holm step (rank from 0
    #: in ascending p, m scores compared); 1 − α (95 %) with one score.
    interval_confidence: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    verdict: Verdict = NOT_COMPARED
    #: Why there is no verdict (too few items scored in both runs, …).
    reason: str | None = None
    #: The smallest mean difference these items detect with 80 % power at the Holm-corrected level.
    detectable_difference: float | None = None
    improved: int = 0
    regressed: int = 0
    unchanged: int = 0
    #: The items that regressed most, worst first (at most ``Options.top``).
    worst_items: list[ItemChange] = Field(default_factory=list)
    #: For a KPI: its run-level values, shown beside the per-item comparison so the two are not confused.
    run_level: RunLevel | None = None
    def interval_text(self) -> str:
        """The interval with its level on one line, e.g. ``[+0.217, +0.533] at 98.33 %`` ("–" without one)."""
        if self.interval is None:
            return "–"
        level = f" at {self.interval_confidence * 100:.4g} %" if self.interval_confidence is not None else ""
        return f"[{self.interval[0]:+.3f}, {self.interval[1]:+.3f}]{level}"

    def run_level_text(self) -> str | None:
        """Why a KPI's per-item means and its run-level values differ, with both, on one line (None if not a KPI)."""
        if self.run_level is None:
            return None

        def pair(baseline: float | None, candidate: float | None) -> str:
            return " → ".join("–" if v is None else f"{v:.3f}" for v in (baseline, candidate))

        return (
            f"{self.name} is a KPI: compared here per item, the mean of its per-trace values "
            f"({pair(self.baseline.mean, self.candidate.mean)}); its run-level value, the formula applied to "
            f"each run's metric means, is {pair(self.run_level.baseline, self.run_level.candidate)}"
        )

    # For the plots (not in the JSON): each side's per-item values and the paired differences.
    baseline_values: list[float] = Field(default_factory=list, exclude=True)
    candidate_values: list[float] = Field(default_factory=list, exclude=True)
    differences: list[float] = Field(default_factory=list, exclude=True)


class PassPoint(BaseModel):
    k: int
    #: Items with at least k attempts (the mean is over these).
    items: int
    pass_at_k: float
    pass_at_k_interval: tuple[float, float] | None
    pass_hat_k: float
    pass_hat_k_interval: tuple[float, float] | None


class PassCurve(BaseModel):
    run: str
    criterion: str
    points: list[PassPoint]


class RunSummary(BaseModel):
    name: str
    id: str | None = None
    items: int
    samples: int


class Comparison(BaseModel):
    baseline: RunSummary
    candidate: RunSummary
    options: Options
    metrics: list[MetricComparison]
    only_in_baseline: list[str]
    only_in_candidate: list[str]
    pass_curves: list[PassCurve] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    @property
    def worse(self) -> list[str]:
        return [m.name for m in self.metrics if m.verdict == WORSE]

    @property
    def better(self) -> list[str]:
        return [m.name for m in self.metrics if m.verdict == BETTER]


class Report(BaseModel):
    """Everything ``compare`` prints: one comparison per candidate run."""

    source: str
    comparisons: list[Comparison]

    @property
    def regressions(self) -> list[tuple[str, str]]:
        """(candidate run, score name) for every significantly worse score."""
        return [(c.candidate.name, name) for c in self.comparisons for name in c.worse]


def _summary(run: RunValues) -> RunSummary:
    return RunSummary(name=run.name, id=run.id, items=len(run.items), samples=run.samples)


def _compare_metric(
    name: str,
    baseline: RunValues,
    candidate: RunValues,
    options: Options,
    link: Callable[[str], str | None],
) -> MetricComparison:
    base, cand = baseline.item_means(name), candidate.item_means(name)
    both = sorted(set(base) & set(cand))
    result = MetricComparison(
        name=name,
        baseline=Side(mean=_mean(base.values()), items=len(base)),
        candidate=Side(mean=_mean(cand.values()), items=len(cand)),
        paired=len(both),
        baseline_values=sorted(base.values()),
        candidate_values=sorted(cand.values()),
    )
    if not base or not cand:
        result.reason = f"only the {'baseline' if base else 'candidate'} has {name} values"
        return result
    if len(both) < 2:
        result.reason = f"needs at least 2 items scored in both runs, has {len(both)}"
        return result
    b = [base[i] for i in both]
    c = [cand[i] for i in both]
    differences = [y - x for x, y in zip(b, c, strict=True)]
    result.differences = differences
    result.difference = sum(differences) / len(differences)
    result.p_value = stats.paired_p_value(b, c, seed=options.seed, n_resamples=options.n_resamples)
    result.improved = sum(1 for d in differences if d > 0)
    result.regressed = sum(1 for d in differences if d < 0)
    result.unchanged = len(differences) - result.improved - result.regressed
    changes = sorted((i for i in both if cand[i] < base[i]), key=lambda i: (cand[i] - base[i], i))[: options.top]
    result.worst_items = [
        ItemChange(
            item=i,
            baseline=base[i],
            candidate=cand[i],
            difference=cand[i] - base[i],
            baseline_traces=baseline.trace_ids(i),
            candidate_traces=candidate.trace_ids(i),
            baseline_links=[u for t in baseline.trace_ids(i) if (u := link(t))],
            candidate_links=[u for t in candidate.trace_ids(i) if (u := link(t))],
        )
        for i in changes
    ]
    return result


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def _verdicts(metrics: list[MetricComparison], baseline: RunValues, candidate: RunValues, options: Options) -> None:
    """Holm across the compared names, and each score's interval at its Holm step's level.

    Holm tests the score with the i-th smallest p (from 0) at α / (m − i); its interval is drawn at
    1 − α / (m − i), so the interval excludes 0 at the level the test rejects at (one score at α = 0.05:
    the plain 95 %). better/worse needs the adjusted p below alpha *and* that
    interval clear of 0; when the two disagree (bootstrap and permutation test are different methods,
    and Holm's adjusted p also carries the steps before it) the verdict stays "no detectable difference"
    and its reason says which of the two held, so nothing shown contradicts it."""
    compared = [m for m in metrics if m.p_value is not None]
    raw = [m.p_value for m in compared if m.p_value is not None]
    adjusted = stats.holm(raw)
    steps = stats.holm_steps(raw)
    for metric, p, step in zip(compared, adjusted, steps, strict=True):
        metric.p_adjusted = p
        metric.detectable_difference = stats.detectable_difference(
            metric.differences, alpha=options.alpha, tests=len(compared)
        )
        level = 1 - options.alpha / step
        base, cand = baseline.item_means(metric.name), candidate.item_means(metric.name)
        both = sorted(set(base) & set(cand))
        interval = stats.paired_interval(
            [base[i] for i in both],
            [cand[i] for i in both],
            seed=options.seed,
            n_resamples=options.n_resamples,
            confidence=level,
        )
        metric.interval = (interval.low, interval.high) if interval else None
        metric.interval_confidence = level
        low, high = metric.interval or (float("-inf"), float("inf"))
        clear = high < 0 or low > 0
        if p < options.alpha and high < 0:
            metric.verdict = WORSE
        elif p < options.alpha and low > 0:
            metric.verdict = BETTER
        else:
            metric.verdict = SAME
            if clear:
                metric.reason = f"interval clear of 0 but the Holm-adjusted p {p:.3g} is not below {options.alpha:g}"
            elif p < options.alpha:
                metric.reason = f"Holm-adjusted p {p:.3g} below {options.alpha:g} but the interval contains 0"


def pass_curve(run: RunValues, criterion: PassCriterion, options: Options) -> PassCurve | None:
    """pass@k and pass^k of ``run`` for k = 1 … the most attempts any item has, each the mean over the
    items with at least k judged attempts, with bootstrap intervals over those items. None when no item
    has two judged attempts (nothing repeated: pass@1 is then the plain mean)."""
    tries = {
        item: [criterion.passes(a.values[criterion.metric]) for a in attempts if criterion.metric in a.values]
        for item, attempts in run.items.items()
    }
    tries = {item: t for item, t in tries.items() if t}
    most = max((len(t) for t in tries.values()), default=0)
    if most < 2:
        return None
    points = []
    for k in range(1, most + 1):
        usable = [t for t in tries.values() if len(t) >= k]
        at = [pass_at_k(len(t), sum(t), k) for t in usable]
        hat = [pass_hat_k(len(t), sum(t), k) for t in usable]
        at_interval = stats.mean_interval(at, seed=options.seed, n_resamples=options.n_resamples)
        hat_interval = stats.mean_interval(hat, seed=options.seed, n_resamples=options.n_resamples)
        points.append(
            PassPoint(
                k=k,
                items=len(usable),
                pass_at_k=sum(at) / len(at),
                pass_at_k_interval=(at_interval.low, at_interval.high) if at_interval else None,
                pass_hat_k=sum(hat) / len(hat),
                pass_hat_k_interval=(hat_interval.low, hat_interval.high) if hat_interval else None,
            )
        )
    return PassCurve(run=run.name, criterion=str(criterion), points=points)


def compare_runs(
    baseline: RunValues,
    candidate: RunValues,
    options: Options | None = None,
    *,
    names: Sequence[str] | None = None,
    criterion: PassCriterion | None = None,
    link: Callable[[str], str | None] = lambda _: None,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` on ``names`` (default: every score name either run has)."""
    options = options or Options()
    wanted = list(names) if names is not None else sorted(baseline.score_names() | candidate.score_names())
    metrics = [_compare_metric(name, baseline, candidate, options, link) for name in wanted]
    _verdicts(metrics, baseline, candidate, options)
    comparison = Comparison(
        baseline=_summary(baseline),
        candidate=_summary(candidate),
        options=options,
        metrics=metrics,
        only_in_baseline=sorted(set(baseline.items) - set(candidate.items)),
        only_in_candidate=sorted(set(candidate.items) - set(baseline.items)),
    )
    if criterion is not None:
        for run in (baseline, candidate):
            curve = pass_curve(run, criterion, options)
            if curve is not None:
                comparison.pass_curves.append(curve)
            elif criterion.metric in run.score_names():
                comparison.notes.append(f"{run.name}: one attempt per item, no pass@k curve")
            else:
                comparison.notes.append(f"{run.name}: no {criterion.metric} values for pass@k ({criterion})")
    return comparison

"""The worker's side of comparisons (``compare_to`` on a dataset-runs target): when a run's run-level
scores are posted, compare it with its baseline run and add ``delta_<name>`` scores to the post; after a
``backfill``, compare the runs it scored (``fail_on_regression`` → exit 3).

The candidate's per-item values come from the worker's state (what it just scored); the baseline's too
when this target scored it, else from Langfuse (its traces' scores). A delta score sits on the candidate
run (``datasetRunId``) with the id ``score_id(run, "delta_<name>")``: re-posted as items arrive, it is
overwritten, never duplicated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog
from rich.console import Console

from trace_scorer import __version__
from trace_scorer.compare.analysis import SAME, Comparison, Options, PassCriterion, compare_runs
from trace_scorer.compare.langfuse_runs import list_runs, read_run, run_ref, trace_link
from trace_scorer.compare.runs import RunValues, choose_baseline
from trace_scorer.compare.terminal import print_comparison
from trace_scorer.config.common import SCORE_NAME_PATTERN
from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse import Dataset, Experiment, LangfuseClient, ScoreSubject, ScoreToPost
from trace_scorer.metrics.pass_at_k import PassAtK, PassAtKOptions
from trace_scorer.scoring.plan import TargetPlan
from trace_scorer.state import RunState, StateStore, StoredResult

log = structlog.get_logger(__name__)

#: How far before the candidate's start the worker looks for its baseline run.
BASELINE_HORIZON = timedelta(days=180)
DELTA_PREFIX = "delta_"
#: The exit code of ``backfill`` and ``compare`` when a score regressed and the user asked to fail on it.
EXIT_REGRESSION = 3


def delta_name(name: str) -> str:
    return f"{DELTA_PREFIX}{name}"


def pass_criterion(target: TargetSettings) -> PassCriterion | None:
    """The target's pass@k correctness rule (its ``pass_at_k`` metric's options), if it has one."""
    for entry in target.metrics:
        if entry.metric == PassAtK.key:
            options = PassAtKOptions.model_validate(entry.options)
            return PassCriterion(options.correct_when, options.threshold, options.direction)
    return None


def compared_names(plan: TargetPlan) -> list[str]:
    """The per-item scores of a plan: its per-sample metrics and per-sample KPIs."""
    return plan.sample_score_names() + [kpi.name for kpi in plan.sample_kpis]


def stored_run(name: str, run_id: str, started: datetime | None, results: Sequence[StoredResult]) -> RunValues:
    """A run's values as the worker kept them (``worker.scores.encode_outcomes``: ``{name: {"value": v}}``
    for a score, ``skipped``/``failed`` entries otherwise, which have no value)."""
    run = RunValues(name, run_id, started)
    for result in results:
        outcomes: Mapping[str, Mapping[str, Any]] = json.loads(result.outcomes)
        values = {n: float(entry["value"]) for n, entry in outcomes.items() if "value" in entry}
        run.add(result.item_id or result.subject, result.subject, values)
    return run


async def compare_with_baseline(
    target: TargetSettings,
    plan: TargetPlan,
    client: LangfuseClient,
    state: StateStore,
    datasets: Sequence[Dataset],
    candidate: Experiment,
) -> Comparison | None:
    """The candidate run against the run ``target.compare_to`` names (None: no such run before it)."""
    spec = target.compare_to
    if spec is None:
        return None
    since = candidate.start_time - BASELINE_HORIZON
    mine = [d for d in datasets if d.id == candidate.dataset_id] or list(datasets)
    runs = [e for e in await list_runs(client, mine, since) if e.dataset_id == candidate.dataset_id]
    listed = {e.id: e for e in runs}
    candidate = listed.get(candidate.id, candidate)
    listed[candidate.id] = candidate
    chosen = choose_baseline(spec, [run_ref(e) for e in listed.values()], run_ref(candidate))
    if chosen is None:
        log.info("run_not_compared", target=target.name, run=candidate.name, compare_to=spec, reason="no such run")
        return None
    baseline = listed[chosen.id]
    names = compared_names(plan)
    candidate_values = stored_run(
        candidate.name, candidate.id, candidate.start_time, state.run_results(target.name, candidate.id)
    )
    stored = state.run_results(target.name, baseline.id)
    if stored:
        baseline_values = stored_run(baseline.name, baseline.id, baseline.start_time, stored)
    else:
        baseline_values = await read_run(client, baseline, since, names)
    return compare_runs(
        baseline_values,
        candidate_values,
        Options(),
        names=names,
        criterion=pass_criterion(target),
        link=trace_link(client),
    )


def delta_scores(comparison: Comparison, target: TargetSettings, timestamp: datetime) -> list[ScoreToPost]:
    """``delta_<name>`` on the candidate run for every compared score: the mean paired difference, the
    interval and the verdict in the comment, everything else in the metadata."""
    run_id = comparison.candidate.id
    if run_id is None:
        return []
    posts = []
    for m in comparison.metrics:
        name = delta_name(m.name)
        if m.difference is None or not SCORE_NAME_PATTERN.match(name):
            continue
        interval = f" {m.interval_text()}" if m.interval else ""
        comment = (
            f"{m.difference:+.3f}{interval} vs {comparison.baseline.name} over {m.paired} items: {m.verdict} "
            f"(Holm p = {m.p_adjusted:.3g})"
        )
        metadata = {
            "scorer": f"trace-scorer {__version__}",
            "target": target.name,
            "baseline_run": comparison.baseline.name,
            "baseline_run_id": comparison.baseline.id,
            "baseline_mean": m.baseline.mean,
            "candidate_mean": m.candidate.mean,
            "paired_items": m.paired,
            "interval": list(m.interval) if m.interval else None,
            "confidence": m.interval_confidence,
            "p_value": m.p_value,
            "p_adjusted": m.p_adjusted,
            "verdict": m.verdict,
            "detectable_difference": m.detectable_difference,
            "method": f"{comparison.options.interval}, {comparison.options.test}, Holm; "
            f"{comparison.options.n_resamples} resamples, seed {comparison.options.seed}",
        }
        posts.append(
            ScoreToPost(
                subject=ScoreSubject.run(run_id),
                name=name,
                value=m.difference,
                timestamp=timestamp,
                comment=comment,
                metadata=metadata,
            )
        )
    return posts


def log_comparison(target: TargetSettings, comparison: Comparison) -> None:
    fields = {
        "target": target.name,
        "run": comparison.candidate.name,
        "baseline": comparison.baseline.name,
        "better": comparison.better,
        "worse": comparison.worse,
        "unchanged": [m.name for m in comparison.metrics if m.verdict == SAME],
        "only_in_baseline": len(comparison.only_in_baseline),
        "only_in_candidate": len(comparison.only_in_candidate),
    }
    if comparison.worse:
        log.warning("run_regressed", **fields)
    else:
        log.info("run_compared", **fields)


async def comparison_scores(
    target: TargetSettings,
    plan: TargetPlan,
    client: LangfuseClient,
    state: StateStore,
    datasets: Sequence[Dataset],
    members: Sequence[Experiment],
    runs: Mapping[str, RunState],
) -> list[ScoreToPost]:
    """The worker's hook, called as a group's run-level scores are posted: each run of the group compared
    with its baseline (logged), as ``delta_<name>`` scores timestamped like the run's other run-level
    scores. Empty without ``compare_to``."""
    if target.compare_to is None:
        return []
    posts: list[ScoreToPost] = []
    for experiment in members:
        comparison = await compare_with_baseline(target, plan, client, state, datasets, experiment)
        if comparison is None:
            continue
        log_comparison(target, comparison)
        posts += delta_scores(comparison, target, runs[experiment.id].first_seen)
    return posts


async def compare_backfilled(
    target: TargetSettings,
    plan: TargetPlan,
    client: LangfuseClient,
    state: StateStore,
    datasets: Sequence[Dataset],
    since: datetime,
    selected: Callable[[Experiment], bool],
) -> list[Comparison]:
    """After ``backfill``: every selected run since ``since`` that this target scored, compared with its
    baseline (whether or not it is quiet yet: the CI gate of a benchmark run that just ended)."""
    if target.compare_to is None:
        return []
    comparisons = []
    for experiment in await list_runs(client, datasets, since):
        if not selected(experiment) or not state.run_results(target.name, experiment.id):
            continue
        comparison = await compare_with_baseline(target, plan, client, state, datasets, experiment)
        if comparison is not None:
            log_comparison(target, comparison)
            comparisons.append(comparison)
    return comparisons


def backfill_verdict(target: TargetSettings, comparisons: Sequence[Comparison], console: Console) -> int:
    """Print the comparisons a backfill made; 3 when ``fail_on_regression`` and a score is significantly
    worse than in its baseline run, else 0."""
    for comparison in comparisons:
        print_comparison(console, comparison)
    worse = [f"{name} ({c.candidate.name} vs {c.baseline.name})" for c in comparisons for name in c.worse]
    if worse and target.fail_on_regression:
        console.print(f"[red]significantly worse[/red]: {', '.join(worse)} (fail_on_regression: exit 3)")
        return EXIT_REGRESSION
    return 0

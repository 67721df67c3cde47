"""``trace-scorer compare``: a baseline run against one or more candidate runs, from sample files (scored
here like ``score`` does, runs told apart by ``group_by``) or from a Langfuse dataset's runs.

Exit codes: 0 compared, 1 nothing could be read, 2 configuration or usage error, 3 a score is significantly
worse and ``--fail-on-regression`` (or the target's ``fail_on_regression``) asked for a failing exit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from trace_scorer.compare.analysis import Comparison, Options, PassCriterion, Report, RunLevel, compare_runs
from trace_scorer.compare.langfuse_runs import dataset, list_runs, read_run, run_ref, trace_link
from trace_scorer.compare.runs import (
    PATTERN_PREFIX,
    RunRef,
    RunValues,
    choose_baseline,
    choose_candidates,
    runs_from_results,
)
from trace_scorer.compare.stats import N_RESAMPLES
from trace_scorer.compare.terminal import print_report, write_json
from trace_scorer.compare.worker import EXIT_REGRESSION, compared_names, pass_criterion
from trace_scorer.config import ConfigError, Settings, TargetSettings, load_settings
from trace_scorer.config.targets import ALL_SAMPLES
from trace_scorer.data.outcomes import Score
from trace_scorer.errors import UserError
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.metrics.pass_at_k import attempt_key
from trace_scorer.offline.command import ScoredFiles, ScoreFiles
from trace_scorer.runtime.logs import configure_logging
from trace_scorer.scoring.pipeline import Pipeline, SampleResult
from trace_scorer.scoring.plan import raw_target_problems

EXIT_OK, EXIT_NOTHING_READ = 0, 1
#: Without ``--since``: runs of the dataset with items in the last this many days are listed.
DEFAULT_SINCE = timedelta(days=90)


def add_compare_arguments(parser: argparse.ArgumentParser, parse_datetime: Callable[[str], datetime]) -> None:
    parser.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="sample files or folders (offline); none with --dataset"
    )
    parser.add_argument("--config", type=Path, help="settings file (default: ./settings.toml if present)")
    parser.add_argument("--target", help="the configured target whose metrics (offline) or score names to use")
    parser.add_argument("--dataset", help="compare runs of this Langfuse dataset (instead of files)")
    parser.add_argument(
        "--baseline",
        help="the run to compare with: a run name, 'previous' (the newest run before the candidate), 'latest', "
        f"or '{PATTERN_PREFIX}PATTERN' (default: the target's compare_to)",
    )
    parser.add_argument(
        "--candidate",
        nargs="+",
        metavar="RUN",
        help="the run(s) to judge: names, 'latest' or 're:PATTERN' (every matching run); "
        "default: 'latest' in Langfuse, every run but the baseline offline",
    )
    parser.add_argument(
        "--group-by", help="offline: the sample field telling runs apart (default: the target's group_by, else run_id)"
    )
    parser.add_argument("--metric", nargs="+", metavar="NAME", help="compare only these score names")
    parser.add_argument(
        "--pass-when",
        metavar="NAME>=X",
        help="pass@k: when an attempt is correct (default: the target's pass_at_k metric)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level of the verdicts (0.05)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the permutation test (0)")
    parser.add_argument("--resamples", type=int, default=N_RESAMPLES, help=f"resamples ({N_RESAMPLES})")
    parser.add_argument("--top", type=int, default=10, help="regressed items listed per score (10)")
    parser.add_argument("--since", type=parse_datetime, help="Langfuse: list runs with items since (default: 90 days)")
    parser.add_argument("--json", action="store_true", help="the comparison as JSON instead of a table")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    parser.add_argument("--fail-on-regression", action="store_true", help="exit 3 when a score is significantly worse")


def _options(args: argparse.Namespace) -> Options:
    if not 0 < args.alpha < 1:
        raise UserError(f"--alpha {args.alpha}: must be between 0 and 1")
    if args.resamples < 100:
        raise UserError(f"--resamples {args.resamples}: use at least 100 (the default is {N_RESAMPLES})")
    if args.top < 0:
        raise UserError(f"--top {args.top}: must be 0 or more")
    return Options(alpha=args.alpha, seed=args.seed, n_resamples=args.resamples, top=args.top)


def _target(settings: Settings, name: str | None) -> TargetSettings | None:
    if name is not None:
        return settings.target(name)
    return settings.targets[0] if len(settings.targets) == 1 else None


def _criterion(args: argparse.Namespace, target: TargetSettings | None) -> PassCriterion | None:
    if args.pass_when:
        return PassCriterion.parse(args.pass_when)
    return pass_criterion(target) if target is not None else None


def _offline(args: argparse.Namespace, settings: Settings, score_files: ScoreFiles) -> Report | int:
    try:
        scored = score_files(settings, args.target, args.paths)
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    for error in scored.errors:
        print(f"trace-scorer: skipped {error}", file=sys.stderr)
    if scored.plan is None or not scored.results:
        print("trace-scorer: no sample could be read", file=sys.stderr)
        return EXIT_NOTHING_READ
    target = scored.plan.target
    group_by = args.group_by or (target.group_by if target.group_by not in (None, ALL_SAMPLES) else "run_id")
    runs = runs_from_results(scored.results, group_by=group_by)
    ungrouped = len(scored.results) - sum(run.samples for run in runs.values())
    if len(runs) < 2:
        found = ", ".join(runs) or "none"
        raise UserError(f"compare needs at least two runs: the samples' {group_by} values give {found}")
    refs = [RunRef(name, name, run.started) for name, run in runs.items()]
    spec = args.baseline or target.compare_to
    if spec is None:
        raise UserError(f"name the baseline run: --baseline RUN (runs: {', '.join(sorted(runs))})")
    candidates = _candidates(args.candidate, refs, spec)
    comparisons = []
    for candidate in candidates:
        baseline = choose_baseline(spec, refs, candidate)
        if baseline is None:
            raise UserError(f"no baseline run {spec!r} for {candidate.name!r} (runs: {', '.join(sorted(runs))})")
        comparisons.append(
            compare_runs(
                runs[baseline.name],
                runs[candidate.name],
                _options(args),
                names=args.metric or scored.plan.sample_score_names() + [k.name for k in scored.plan.sample_kpis],
                criterion=_criterion(args, target),
            )
        )
    _add_run_levels(comparisons, scored, group_by)
    report = Report(
        source=f"files: {', '.join(str(p) for p in args.paths)} (runs by {group_by})", comparisons=comparisons
    )
    if ungrouped:
        for comparison in report.comparisons:
            comparison.notes.append(f"{ungrouped} samples have no {group_by}: in no run")
    return report


def _add_run_levels(comparisons: Sequence[Comparison], scored: ScoredFiles, group_by: str) -> None:
    """Each compared KPI's run-level value in both runs, computed as ``score`` computes a group's (the
    pipeline's ``score_group``), so a reader sees why it differs from the per-item mean beside it."""
    assert scored.plan is not None
    kpis = {k.name for k in scored.plan.group_kpis}
    if not any(m.name in kpis for c in comparisons for m in c.metrics):
        return
    by_run: dict[str, list[SampleResult]] = {}
    for result in scored.results:
        if (run := attempt_key(result.sample, group_by)) is not None:
            by_run.setdefault(run, []).append(result)
    pipeline = Pipeline(scored.plan)
    wanted = {name for c in comparisons for name in (c.baseline.name, c.candidate.name)}
    groups = {run: asyncio.run(pipeline.score_group(run, by_run[run])) for run in wanted if run in by_run}

    def value(run: str, name: str) -> float | None:
        outcome = groups[run].outcomes.get(name) if run in groups else None
        return outcome.value if isinstance(outcome, Score) else None

    for comparison in comparisons:
        for metric in comparison.metrics:
            if metric.name in kpis:
                metric.run_level = RunLevel(
                    baseline=value(comparison.baseline.name, metric.name),
                    candidate=value(comparison.candidate.name, metric.name),
                )


def _candidates(specs: Sequence[str] | None, refs: Sequence[RunRef], baseline_spec: str) -> list[RunRef]:
    """The candidate runs, each once; offline without ``--candidate``: every run that is not the baseline."""
    if specs:
        chosen: dict[str, RunRef] = {}
        for spec in specs:
            for ref in choose_candidates(spec, refs):
                chosen.setdefault(ref.id, ref)
        return list(chosen.values())
    return [r for r in refs if r.name != baseline_spec]


async def _from_langfuse(args: argparse.Namespace, settings: Settings) -> Report:
    target = _target(settings, args.target)
    spec = args.baseline or (target.compare_to if target is not None else None) or "previous"
    since = args.since or datetime.now(UTC) - DEFAULT_SINCE
    async with LangfuseClient(settings.langfuse) as client:
        await client.connect()
        found = await dataset(client, args.dataset)
        experiments = {e.id: e for e in await list_runs(client, [found], since)}
        refs = [run_ref(e) for e in experiments.values()]
        if not refs:
            raise UserError(f"dataset {args.dataset!r} has no run with items since {since.isoformat()} (see --since)")
        names = args.metric or (_target_names(target) if target is not None else None)
        candidates = _candidates(args.candidate or ["latest"], refs, spec)
        values: dict[str, RunValues] = {}
        comparisons: list[Comparison] = []
        for candidate in candidates:
            baseline = choose_baseline(spec, refs, candidate)
            if baseline is None:
                raise UserError(f"no baseline run {spec!r} for {candidate.name!r} in dataset {args.dataset!r}")
            for ref in (baseline, candidate):
                if ref.id not in values:
                    values[ref.id] = await read_run(client, experiments[ref.id], since, names)
            comparisons.append(
                compare_runs(
                    values[baseline.id],
                    values[candidate.id],
                    _options(args),
                    names=names,
                    criterion=_criterion(args, target),
                    link=trace_link(client),
                )
            )
    return Report(source=f"Langfuse {settings.langfuse.base_url}, dataset {args.dataset}", comparisons=comparisons)


def _target_names(target: TargetSettings) -> list[str]:
    """A target's per-item score names, as its plan orders them (without building judges)."""
    from trace_scorer.scoring.plan import build_plan

    try:
        plan = build_plan(target)
    except ConfigError:
        return [m.score_name for m in target.metrics] + [k.name for k in target.kpis]
    return compared_names(plan)


def run_compare(args: argparse.Namespace, score_files: ScoreFiles) -> int:
    if args.html:  # before any work: a missing extra is found in a second, not after the scoring
        from trace_scorer.compare.html import require_report_extra

        require_report_extra()
    settings = load_settings(args.config, check_targets=raw_target_problems)
    configure_logging(settings.log.level, settings.log.format)
    if args.dataset and args.paths:
        raise UserError("compare reads either files (PATH…) or a Langfuse dataset (--dataset), not both")
    if not args.dataset and not args.paths:
        raise UserError("compare needs sample files (PATH…) or a Langfuse dataset (--dataset NAME)")
    if args.dataset:
        report: Report | int = asyncio.run(_from_langfuse(args, settings))
    else:
        report = _offline(args, settings, score_files)
    if isinstance(report, int):
        return report
    if args.json:
        write_json(sys.stdout, report)
    else:
        from trace_scorer.offline.report import table_console

        print_report(table_console(), report)
    if args.html:
        from trace_scorer.compare.html import write_html

        write_html(args.html, report)
        print(f"trace-scorer: report written to {args.html}", file=sys.stderr)
    target = _target(settings, args.target)
    fail = args.fail_on_regression or (target is not None and target.fail_on_regression)
    if fail and report.regressions:
        worse = ", ".join(f"{name} ({run})" for run, name in report.regressions)
        print(f"trace-scorer: significantly worse: {worse}", file=sys.stderr)
        return EXIT_REGRESSION
    return EXIT_OK

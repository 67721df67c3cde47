"""The ``trace-scorer`` command line.

Exit codes: 0 finished (even with skipped samples), 1 nothing could be read, 2 configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from trace_scorer import __version__
from trace_scorer.config import ConfigError, MetricEntry, Settings, TargetSettings, load_settings
from trace_scorer.config.targets import ALL_SAMPLES
from trace_scorer.errors import UserError
from trace_scorer.inputs import load_inputs
from trace_scorer.logs import configure_logging
from trace_scorer.metrics.registry import MetricRegistry, default_registry
from trace_scorer.pipeline import GroupResult, Pipeline, SampleResult
from trace_scorer.plan import TargetPlan, build_plan
from trace_scorer.report import print_table, table_console, write_json_lines
from trace_scorer.resources import open_resources
from trace_scorer.sample import Sample
from trace_scorer.times import parse_timestamp
from trace_scorer.worker.commands import run_backfill, run_check
from trace_scorer.worker.service import run_worker

EXIT_OK, EXIT_NOTHING_READ, EXIT_CONFIG = 0, 1, 2
#: Show a progress bar from this many samples on (and only when stderr is a terminal).
PROGRESS_FROM = 200
#: Samples scored at once when a plan has metrics that wait on the network (judges, embedders).
REMOTE_CONCURRENCY = 32


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trace-scorer", description="Score AI-agent traces (Langfuse).")
    parser.add_argument("--version", action="version", version=f"trace-scorer {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="score sample files or exported traces offline")
    score.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a JSON/JSONL file or a folder of them")
    score.add_argument("--config", type=Path, help="settings file (default: ./settings.toml if present)")
    score.add_argument("--target", help="which configured target's metrics to use (default: the only one)")
    score.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")

    run = commands.add_parser("run", help="the long-running worker: score new traces and dataset runs in Langfuse")
    run.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")

    backfill = commands.add_parser("backfill", help="score a past window once")
    backfill.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")
    backfill.add_argument("--target", required=True, help="the configured target to backfill")
    backfill.add_argument("--from", dest="start", required=True, type=_datetime, help="start (ISO date or time, UTC)")
    backfill.add_argument("--to", dest="end", type=_datetime, help="end (default: now)")

    check = commands.add_parser("check", help="verify configuration, Langfuse reachability and credentials")
    check.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")
    return parser


def _datetime(text: str) -> datetime:
    """ISO dates or times; without a zone they are UTC."""
    try:
        return parse_timestamp(text)
    except ValueError:
        message = f"{text!r} is not an ISO date or time (e.g. 2026-11-01 or 2026-11-01T12:00)"
        raise argparse.ArgumentTypeError(message) from None


def default_target(samples: Sequence[Sample], registry: MetricRegistry) -> TargetSettings:
    """Without configuration: every deterministic per-sample metric whose inputs some sample has."""
    keys = []
    for cls in registry.classes():
        if cls.per_group or not cls.deterministic():
            continue
        try:
            cls.Options.model_validate({})
        except ValidationError:
            continue  # needs options that only a configuration can give
        if any(all(getattr(s, f) is not None for f in cls.requires) for s in samples):
            keys.append(cls.key)
    metrics = [MetricEntry(metric=k) for k in keys]
    # model_construct: a configured target must name metrics, but "none of them applies" is a valid
    # outcome here (the table then lists the samples and says why nothing was scored).
    return TargetSettings.model_construct(name="default", metrics=metrics)


def _choose_target(settings: Settings, name: str | None) -> tuple[int, TargetSettings] | None:
    if name is not None:
        target = settings.target(name)
        return settings.targets.index(target), target
    if not settings.targets:
        return None
    if len(settings.targets) > 1:
        names = ", ".join(t.name for t in settings.targets)
        raise ConfigError(f"several targets are configured ({names}): choose one with --target")
    return 0, settings.targets[0]


def _group_key(sample: Sample, field: str) -> str | None:
    if field == ALL_SAMPLES:
        return "all"
    if field.startswith("metadata."):
        value = sample.metadata.get(field.removeprefix("metadata."))
    else:
        value = getattr(sample, field, None)
    return None if value is None else str(value)


async def _score(
    settings: Settings, target: TargetSettings, index: int, samples: list[Sample], show_progress: bool
) -> tuple[TargetPlan, list[SampleResult], list[GroupResult]]:
    """Build the judge, the embedder and the plan, score every sample, then the groups; the judge and the
    embedder are closed in this loop."""
    stack = AsyncExitStack()
    try:
        resources = open_resources(settings, stack, tracing_default=False)
        plan = build_plan(target, index=index, registry=default_registry(), resources=resources)
        pipeline = Pipeline(plan)
        remote = any(not m.deterministic() for m in plan.sample_metrics)
        results: list[SampleResult] = []
        progress = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=not show_progress,
            transient=True,
        )
        with progress:
            task = progress.add_task("scoring", total=len(samples))
            async for result in pipeline.score_samples(samples, concurrency=REMOTE_CONCURRENCY if remote else 1):
                results.append(result)
                progress.advance(task)
        groups: list[GroupResult] = []
        if target.group_by:
            members: dict[str, list[SampleResult]] = {}
            for result in results:
                key = _group_key(result.sample, target.group_by)
                if key is not None:
                    members.setdefault(key, []).append(result)
            groups = [await pipeline.score_group(key, group) for key, group in members.items()]
        return plan, results, groups
    finally:
        await stack.aclose()


def run_score(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    configure_logging(settings.log.level, settings.log.format)
    registry = default_registry()
    chosen = _choose_target(settings, args.target)

    try:
        loaded = load_inputs(args.paths, references=chosen[1].references if chosen else None)
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    for error in loaded.errors:
        print(f"trace-scorer: skipped {error}", file=sys.stderr)
    if not loaded.samples:
        print("trace-scorer: no sample could be read", file=sys.stderr)
        return EXIT_NOTHING_READ

    index, target = chosen if chosen else (0, default_target(loaded.samples, registry))
    if not target.metrics:
        print("trace-scorer: no deterministic metric has its inputs in these samples", file=sys.stderr)
    show_progress = sys.stderr.isatty() and len(loaded.samples) >= PROGRESS_FROM
    plan, results, groups = asyncio.run(_score(settings, target, index, loaded.samples, show_progress))

    if args.json:
        write_json_lines(sys.stdout, results, groups)
    else:
        columns = plan.sample_score_names() + [k.name for k in plan.sample_kpis]
        group_columns = plan.sample_score_names() + plan.group_score_names() + [k.name for k in plan.group_kpis]
        console = table_console()
        console.print(f"[bold]target {target.name}[/bold]: {len(results)} samples", highlight=False)
        print_table(console, columns, results, groups, group_columns)
    return EXIT_OK


def _worker_settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    configure_logging(settings.log.level, settings.log.format)
    if not settings.targets:
        raise ConfigError("no [[targets]] configured: the worker has nothing to score (see settings.toml)")
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "score":
            return run_score(args)
        if args.command == "run":
            return asyncio.run(run_worker(_worker_settings(args)))
        if args.command == "backfill":
            return asyncio.run(run_backfill(_worker_settings(args), args.target, args.start, args.end))
        if args.command == "check":
            return asyncio.run(run_check(_worker_settings(args), table_console()))
    except UserError as exc:
        print(f"trace-scorer: {exc.heading}{exc}", file=sys.stderr)
        return EXIT_CONFIG
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover - argparse requires one


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The ``trace-scorer`` command line.

Exit codes: 0 finished (even with skipped samples), 1 nothing could be read, 2 configuration error,
3 a compared run is significantly worse (``compare``/``backfill`` with fail_on_regression).
``calibrate`` (trace_scorer/calibrate/) reports how far a metric's judges agree with human labels.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trace_scorer.errors import UserError

if TYPE_CHECKING:
    from trace_scorer.compare.command import ScoredFiles
    from trace_scorer.config import Settings, TargetSettings
    from trace_scorer.metrics.registry import MetricRegistry
    from trace_scorer.pipeline import GroupResult, SampleResult
    from trace_scorer.plan import TargetPlan
    from trace_scorer.providers.usage import Usage
    from trace_scorer.sample import Sample

# Each command imports its modules when it runs (issue 23): `--help` and `score` of a tool-call target
# load neither the worker, Langfuse's SDK, the judges (openai) nor compare's statistics (numpy, scipy);
# tests/unit/core/test_cli_imports.py holds it, bench/bench_startup.py measures it.

EXIT_OK, EXIT_NOTHING_READ, EXIT_CONFIG = 0, 1, 2
#: Show a progress bar from this many samples on (and only when stderr is a terminal).
PROGRESS_FROM = 200
#: Samples scored at once when a plan has metrics that wait on the network (judges, embedders).
REMOTE_CONCURRENCY = 32


def _parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trace-scorer", description="Score AI-agent traces (Langfuse).")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="score sample files or exported traces offline")
    score.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a JSON/JSONL file or a folder of them")
    score.add_argument("--config", type=Path, help="settings file (default: ./settings.toml if present)")
    score.add_argument("--target", help="which configured target's metrics to use (default: the only one)")
    score.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    score.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        metavar="N",
        help="processes for a large input whose metrics compute locally (default: all cores)",
    )

    run = commands.add_parser("run", help="the long-running worker: score new traces and dataset runs in Langfuse")
    run.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")

    backfill = commands.add_parser("backfill", help="score a past window once")
    backfill.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")
    backfill.add_argument("--target", required=True, help="the configured target to backfill")
    backfill.add_argument(
        "--from", "--since", dest="start", required=True, type=_datetime, help="start (ISO date or time, UTC)"
    )
    backfill.add_argument("--to", dest="end", type=_datetime, help="end (default: now)")

    compare = commands.add_parser("compare", help="compare runs: is the candidate better than the baseline?")
    if "compare" in argv:  # its arguments' module loads numpy: only when the command line may be compare's
        from trace_scorer.compare.command import add_compare_arguments

        add_compare_arguments(compare, _datetime)

    calibrate = commands.add_parser(
        "calibrate", help="can this judge be trusted? agreement with human labels, tuned thresholds and panels"
    )
    if "calibrate" in argv:  # its modules load numpy: only when the command line may be calibrate's
        from trace_scorer.calibrate.command import add_calibrate_arguments

        add_calibrate_arguments(calibrate, _datetime)

    check = commands.add_parser("check", help="verify configuration, Langfuse reachability and credentials")
    check.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")

    metrics = commands.add_parser("metrics", help="list every registered metric: the inputs it needs, its options")
    metrics.add_argument("--json", action="store_true", help="one JSON object per metric instead of tables")

    init = commands.add_parser(
        "init", help="write a commented settings file (with Langfuse credentials: proposed from recent traces)"
    )
    init.add_argument("--config", type=Path, default=Path("settings.toml"), help="the file to write (settings.toml)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--hours", type=float, default=24.0, help="how far back to look at traces (24)")
    init.add_argument("--traces", type=_traces, default=50, metavar="N", help="newest traces looked at (50)")

    langfuse = commands.add_parser("langfuse", help="work with the project's Langfuse: import its evaluation rules")
    langfuse_commands = langfuse.add_subparsers(dest="langfuse_command", required=True)
    importer = langfuse_commands.add_parser(
        "import-evaluators", help="write the project's evaluation rules as targets of a settings file"
    )
    importer.add_argument("--config", type=Path, help="settings with the Langfuse connection (default: environment)")
    importer.add_argument(
        "--output", type=Path, default=Path("evaluators.toml"), help="the settings file to write (evaluators.toml)"
    )
    importer.add_argument("--force", action="store_true", help="replace an existing file")

    state = commands.add_parser("state", help="the worker's state: migrate it, import an SQLite state")
    state_commands = state.add_subparsers(dest="state_command", required=True)
    migrate = state_commands.add_parser("migrate", help="bring the configured state to this release's schema")
    migrate.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")
    state_import = state_commands.add_parser(
        "import", help="copy an SQLite state into the configured PostgreSQL state ([state] url)"
    )
    state_import.add_argument("sqlite_file", type=Path, metavar="SQLITE_FILE", help="the SQLite state to copy")
    state_import.add_argument("--config", type=Path, help="settings file (default: ./settings.toml)")
    state_import.add_argument(
        "--force", action="store_true", help="replace what the PostgreSQL state holds (default: refuse unless empty)"
    )
    return parser


class _Version(argparse.Action):
    """``--version``: the installed version, read only when asked (importlib.metadata costs start-up time)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        from trace_scorer import __version__

        print(f"trace-scorer {__version__}")
        parser.exit()


def _datetime(text: str) -> datetime:
    """ISO dates or times; without a zone they are UTC."""
    from trace_scorer.times import parse_timestamp

    try:
        return parse_timestamp(text)
    except ValueError:
        message = f"{text!r} is not an ISO date or time (e.g. 2026-11-01 or 2026-11-01T12:00)"
        raise argparse.ArgumentTypeError(message) from None


def _jobs(text: str) -> int:
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return jobs


def _traces(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of traces (1 or more)")
    return int(text)


def _choose_target(settings: Settings, name: str | None) -> tuple[int, TargetSettings] | None:
    from trace_scorer.config import ConfigError

    if name is not None:
        target = settings.target(name)
        return settings.targets.index(target), target
    if not settings.targets:
        return None
    if len(settings.targets) > 1:
        names = ", ".join(t.name for t in settings.targets)
        raise ConfigError(f"several targets are configured ({names}): choose one with --target")
    return 0, settings.targets[0]


async def _score(
    settings: Settings,
    target: TargetSettings,
    index: int,
    samples: list[Sample],
    show_progress: bool,
    spent: dict[str, Usage] | None = None,
) -> tuple[TargetPlan, list[SampleResult], list[GroupResult]]:
    """Build the judge, the embedder and the plan, score every sample, then the groups; the judge and the
    embedder are closed in this loop. ``spent`` receives the judge's totals per model."""
    from contextlib import AsyncExitStack

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.offline import score_groups
    from trace_scorer.pipeline import Pipeline
    from trace_scorer.plan import build_plan
    from trace_scorer.resources import open_resources

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
        groups = await score_groups(pipeline, target.group_by, results)
        if spent is not None and resources.judge is not None:
            spent.update(resources.judge.ledger.by_model())
        return plan, results, groups
    finally:
        await stack.aclose()


def _files_settings(config: Path | None, paths: Sequence[Path]) -> Path | None:
    """The settings file of ``score``/``compare`` on files, said on stderr (also with ``--json``).

    ``--config`` wins; else a single PATH that is a folder holding a settings.toml uses it (an example
    folder carries the settings it is scored with); else ./settings.toml when present; else none.
    """
    from trace_scorer.config.settings import DEFAULT_CONFIG_FILE

    if config is None and len(paths) == 1 and (paths[0] / DEFAULT_CONFIG_FILE.name).is_file():
        config = paths[0] / DEFAULT_CONFIG_FILE.name
        print(f"trace-scorer: settings: {config} (the folder's own; --config FILE for another)", file=sys.stderr)
    elif config is None and DEFAULT_CONFIG_FILE.is_file():
        config = DEFAULT_CONFIG_FILE
        print(f"trace-scorer: settings: ./{config}", file=sys.stderr)
    elif config is None:
        print("trace-scorer: settings: none (every deterministic metric with its inputs)", file=sys.stderr)
    else:
        print(f"trace-scorer: settings: {config}", file=sys.stderr)
    return config


def run_score(args: argparse.Namespace) -> int:
    import asyncio

    from trace_scorer.inputs import load_inputs
    from trace_scorer.logs import configure_logging
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.offline import computes_locally, observation_matcher
    from trace_scorer.report import print_report

    settings = _load_settings(args.config)
    configure_logging(settings.log.level, settings.log.format)
    registry = default_registry()
    chosen = _choose_target(settings, args.target)
    if chosen is None or computes_locally(chosen[1], registry):
        return _score_locally(args, settings, chosen, registry)

    # Judged metrics: one process, REMOTE_CONCURRENCY samples at a time (trace_scorer/offline.py says why).
    index, target = chosen
    try:
        loaded = load_inputs(args.paths, references=target.references, observations=observation_matcher(target))
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    if (nothing := _nothing_read(loaded.errors, len(loaded.samples))) is not None:
        return nothing
    show_progress = sys.stderr.isatty() and len(loaded.samples) >= PROGRESS_FROM
    spent: dict[str, Usage] = {}
    plan, results, groups = asyncio.run(_score(settings, target, index, loaded.samples, show_progress, spent))

    print_report(args.json, plan, results, groups, judge_usage=spent)
    return EXIT_OK


def _nothing_read(errors: Sequence[object], read: int) -> int | None:
    """Say which records were skipped and why; :data:`EXIT_NOTHING_READ` when no sample (of ``read``) could be."""
    for error in errors:
        print(f"trace-scorer: skipped {error}", file=sys.stderr)
    if not read:
        print("trace-scorer: no sample could be read", file=sys.stderr)
        return EXIT_NOTHING_READ
    return None


def _score_locally(
    args: argparse.Namespace, settings: Settings, chosen: tuple[int, TargetSettings] | None, registry: MetricRegistry
) -> int:
    """``score`` for a target computed on this machine: read and scored a part at a time, ``--jobs`` processes."""
    from trace_scorer.offline import check_resources, default_jobs, score_files
    from trace_scorer.report import print_report

    index, target = chosen if chosen else (0, None)
    check_resources(settings)
    try:
        run = score_files(
            args.paths,
            target=target,
            index=index,
            registry=registry,
            references=target.references if target else None,
            jobs=args.jobs or default_jobs(),
            render_json=args.json,
            show_progress=sys.stderr.isatty(),
            log_level=settings.log.level,
            log_format=settings.log.format,
        )
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    if (nothing := _nothing_read(run.errors, run.samples)) is not None:
        return nothing
    if not run.target.metrics:
        print("trace-scorer: no deterministic metric has its inputs in these samples", file=sys.stderr)
    print_report(args.json, run.plan, run.results, run.groups, lines=run.lines)
    return EXIT_OK


def _score_files(settings: Settings, target_name: str | None, paths: Sequence[Path]) -> ScoredFiles:
    """``score``'s reading and scoring, for ``compare``: the plan used and every sample's results."""
    import asyncio

    from trace_scorer.compare.command import ScoredFiles
    from trace_scorer.inputs import load_inputs
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.offline import default_target

    chosen = _choose_target(settings, target_name)
    loaded = load_inputs(paths, references=chosen[1].references if chosen else None)
    if not loaded.samples:
        return ScoredFiles(None, [], loaded.errors)
    index, target = chosen if chosen else (0, default_target(loaded.samples, default_registry()))
    show_progress = sys.stderr.isatty() and len(loaded.samples) >= PROGRESS_FROM
    plan, results, _groups = asyncio.run(_score(settings, target, index, loaded.samples, show_progress))
    return ScoredFiles(plan, results, loaded.errors)


def _run_state(args: argparse.Namespace) -> int:
    """``state migrate`` / ``state import``: only ``[state]`` (and logging) of the settings matter."""
    from trace_scorer.config import load_settings
    from trace_scorer.logs import configure_logging
    from trace_scorer.state.commands import run_import, run_migrate

    settings = load_settings(args.config)
    configure_logging(settings.log.level, settings.log.format)
    if args.state_command == "migrate":
        code = run_migrate(settings.state)
        url = settings.state.postgres_url
        if url is not None:  # distributed mode's job queue lives beside the state
            from trace_scorer.distributed.fleet import ensure_queue_schema

            created = ensure_queue_schema(url, settings.state.db_schema)
            print("job queue: tables created" if created else "job queue: tables present")
        return code
    return run_import(settings.state, args.sqlite_file, replace=args.force)


def _run_metrics(args: argparse.Namespace) -> int:
    """``metrics``: the registry's metrics (built-in and plug-ins), from their classes."""
    from trace_scorer.catalog import catalog, print_catalog
    from trace_scorer.metrics.registry import default_registry

    print_catalog(catalog(default_registry()), as_json=args.json)
    return EXIT_OK


def _run_init(args: argparse.Namespace) -> int:
    """``init``: a commented settings file; with Langfuse credentials, its target proposed from recent traces."""
    import asyncio
    import os

    from trace_scorer.catalog import catalog
    from trace_scorer.config import load_settings
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.starter import Survey, recent_samples, render, write_settings

    if args.config.exists() and not args.force:  # before reading anything from Langfuse
        raise UserError(f"{args.config} exists: not overwritten (--force replaces it)")
    settings = load_settings(Path(os.devnull))  # the environment only: the file is what is being written
    survey = None
    if settings.langfuse.public_key and settings.langfuse.secret_key is not None:
        samples = asyncio.run(recent_samples(settings, datetime.now(UTC), args.hours, args.traces))
        survey = Survey.of(samples, args.hours)
        print(f"trace-scorer: read {len(samples)} recent traces from {settings.langfuse.base_url}", file=sys.stderr)
    else:
        print("trace-scorer: no Langfuse credentials (LANGFUSE_PUBLIC_KEY/SECRET_KEY): a template", file=sys.stderr)
    text = render(catalog(default_registry()), survey, settings.langfuse.base_url)
    write_settings(args.config, text, force=args.force)
    print(f"trace-scorer: wrote {args.config}", file=sys.stderr)
    return EXIT_OK


def _run_import_evaluators(args: argparse.Namespace) -> int:
    """``langfuse import-evaluators``: the Langfuse connection from ``--config`` or the environment."""
    import asyncio
    import os

    from trace_scorer.config import load_settings
    from trace_scorer.evaluator_import import import_evaluators

    settings = load_settings(args.config if args.config is not None else Path(os.devnull))
    return asyncio.run(import_evaluators(settings, args.output, force=args.force))


def _load_settings(config: Path | None) -> Settings:
    """The settings of a command that plans its targets: a refused file's problems come with those of its
    targets' plans (unknown metric, KPI naming a missing score), in one run rather than two (issue 23)."""
    from trace_scorer.config import load_settings
    from trace_scorer.plan import raw_target_problems

    return load_settings(config, check_targets=raw_target_problems)


def _worker_settings(args: argparse.Namespace) -> Settings:
    from trace_scorer.config import ConfigError
    from trace_scorer.logs import configure_logging

    settings = _load_settings(args.config)
    configure_logging(settings.log.level, settings.log.format)
    if not settings.targets:
        raise ConfigError("no [[targets]] configured: the worker has nothing to score (see settings.toml)")
    return settings


def _refuse_fleet_scopes(settings: Settings) -> None:
    """A fleet cuts windows into batches of traces (distributed/windows.py): a session spans windows and
    batches, so ``scope = "session"`` runs in the single worker only."""
    from trace_scorer.config import ConfigError

    for index, target in enumerate(settings.targets):
        if target.scope == "session":
            raise ConfigError(
                f"targets[{index}].scope: {target.name!r} has scope = 'session', which the single worker runs; "
                "a fleet ([state] url) does not (run it as a worker of its own, with a SQLite state)"
            )


def _run(settings: Settings) -> int:
    """``run``: the single worker, or — with ``[state] url`` — one replica of a fleet sharing the work."""
    import asyncio

    from trace_scorer.worker.service import run_worker

    if settings.state.postgres_url is None:
        return asyncio.run(run_worker(settings))
    _refuse_fleet_scopes(settings)
    from trace_scorer.distributed.fleet import start_replica  # loads procrastinate only when used

    return asyncio.run(run_worker(settings, start=start_replica))


def main(argv: Sequence[str] | None = None) -> int:
    import asyncio

    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv).parse_args(argv)
    try:
        if args.command in ("score", "compare", "calibrate"):
            args.config = _files_settings(args.config, args.paths)
        if args.command == "score":
            return run_score(args)
        if args.command == "run":
            return _run(_worker_settings(args))
        if args.command == "backfill":
            from trace_scorer.worker.commands import run_backfill

            return asyncio.run(run_backfill(_worker_settings(args), args.target, args.start, args.end))
        if args.command == "compare":
            from trace_scorer.compare.command import run_compare

            return run_compare(args, _score_files)
        if args.command == "calibrate":
            from trace_scorer.calibrate.command import run_calibrate

            return run_calibrate(args, _score_files)
        if args.command == "check":
            from trace_scorer.report import table_console
            from trace_scorer.worker.commands import run_check

            return asyncio.run(run_check(_worker_settings(args), table_console()))
        if args.command == "state":
            return _run_state(args)
        if args.command == "langfuse":
            return _run_import_evaluators(args)
        if args.command == "metrics":
            return _run_metrics(args)
        if args.command == "init":
            return _run_init(args)
    except UserError as exc:
        print(f"trace-scorer: {exc.heading}{exc}", file=sys.stderr)
        return EXIT_CONFIG
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover - argparse requires one


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

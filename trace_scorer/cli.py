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
    from trace_scorer.config import Settings

# Each command imports its modules when it runs (issue 23): `--help` and `score` of a tool-call target
# load neither the worker, Langfuse's SDK, the judges (openai) nor compare's statistics (numpy, scipy);
# tests/unit/core/test_cli_imports.py holds it, bench/bench_startup.py measures it.

EXIT_OK, EXIT_NOTHING_READ, EXIT_CONFIG = 0, 1, 2


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
    from trace_scorer.data.times import parse_timestamp

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


def _run_state(args: argparse.Namespace) -> int:
    """``state migrate`` / ``state import``: only ``[state]`` (and logging) of the settings matter."""
    from trace_scorer.config import load_settings
    from trace_scorer.runtime.logs import configure_logging
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
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.onboarding.catalog import catalog, print_catalog

    print_catalog(catalog(default_registry()), as_json=args.json)
    return EXIT_OK


def _run_init(args: argparse.Namespace) -> int:
    """``init``: a commented settings file; with Langfuse credentials, its target proposed from recent traces."""
    import asyncio
    import os

    from trace_scorer.config import load_settings
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.onboarding.catalog import catalog
    from trace_scorer.onboarding.starter import Survey, recent_samples, render, write_settings

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
    from trace_scorer.onboarding.evaluator_import import import_evaluators

    settings = load_settings(args.config if args.config is not None else Path(os.devnull))
    return asyncio.run(import_evaluators(settings, args.output, force=args.force))


def _load_settings(config: Path | None) -> Settings:
    """The settings of a command that plans its targets: a refused file's problems come with those of its
    targets' plans (unknown metric, KPI naming a missing score), in one run rather than two (issue 23)."""
    from trace_scorer.config import load_settings
    from trace_scorer.scoring.plan import raw_target_problems

    return load_settings(config, check_targets=raw_target_problems)


def _worker_settings(args: argparse.Namespace) -> Settings:
    from trace_scorer.config import ConfigError
    from trace_scorer.runtime.logs import configure_logging

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
    from trace_scorer.worker import event_loop
    from trace_scorer.worker.service import run_worker

    if settings.state.postgres_url is None:
        return event_loop.run(run_worker(settings), settings.worker.event_loop)
    _refuse_fleet_scopes(settings)
    from trace_scorer.distributed.fleet import start_replica  # loads procrastinate only when used

    return event_loop.run(run_worker(settings, start=start_replica), settings.worker.event_loop)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv).parse_args(argv)
    try:
        if args.command in ("score", "compare", "calibrate"):
            from trace_scorer.offline import command as offline

            args.config = offline.files_settings(args.config, args.paths)
        if args.command == "score":
            return offline.run_score(args, _load_settings(args.config))
        if args.command == "run":
            return _run(_worker_settings(args))
        if args.command == "backfill":
            from trace_scorer.worker import event_loop
            from trace_scorer.worker.commands import run_backfill

            settings = _worker_settings(args)
            backfill = run_backfill(settings, args.target, args.start, args.end)
            return event_loop.run(backfill, settings.worker.event_loop)
        if args.command == "compare":
            from trace_scorer.compare.command import run_compare

            return run_compare(args, offline.scored_files)
        if args.command == "calibrate":
            from trace_scorer.calibrate.command import run_calibrate

            return run_calibrate(args, offline.scored_files)
        if args.command == "check":
            from trace_scorer.offline.report import table_console
            from trace_scorer.worker import event_loop
            from trace_scorer.worker.commands import run_check

            settings = _worker_settings(args)
            return event_loop.run(run_check(settings, table_console()), settings.worker.event_loop)
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

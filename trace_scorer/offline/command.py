"""The file commands' use of the offline path: ``score`` itself, and the scoring that ``compare`` and
``calibrate`` do on files. The command line (``cli.py``) only parses arguments and calls in here.

Exit codes as in ``cli.py``: 0 finished (even with skipped samples), 1 nothing could be read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trace_scorer.config import Settings
    from trace_scorer.offline.read import ReadError
    from trace_scorer.scoring.pipeline import SampleResult
    from trace_scorer.scoring.plan import TargetPlan

EXIT_OK, EXIT_NOTHING_READ = 0, 1


@dataclass
class ScoredFiles:
    """What ``score``'s reading and scoring made of the files: the plan used and each sample's results."""

    plan: TargetPlan | None
    results: list[SampleResult] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)


#: ``(settings, --target, paths) → ScoredFiles``: the ``score`` command's pipeline (:func:`scored_files`).
ScoreFiles = Callable[["Settings", str | None, Sequence[Path]], ScoredFiles]


def files_settings(config: Path | None, paths: Sequence[Path]) -> Path | None:
    """The settings file of ``score``/``compare``/``calibrate`` on files, said on stderr (also with ``--json``).

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


def run_score(args: argparse.Namespace, settings: Settings) -> int:
    """``score``: read and score ``args.paths`` with ``settings`` (loaded by the command line, its targets
    checked), print the table or the JSON lines."""
    from trace_scorer.runtime.logs import logging_on_first_use

    with logging_on_first_use(settings.log.level, settings.log.format):  # most runs log nothing
        return _score(args, settings)


def _score(args: argparse.Namespace, settings: Settings) -> int:
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.offline.jobs import default_jobs
    from trace_scorer.offline.report import print_report
    from trace_scorer.offline.scoring import score_files
    from trace_scorer.offline.targets import choose_target

    registry = default_registry()
    index, target = choose_target(settings, args.target) or (0, None)
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
            settings=settings,
            log_level=settings.log.level,
            log_format=settings.log.format,
        )
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    if (nothing := nothing_read(run.errors, run.samples)) is not None:
        return nothing
    if not run.target.metrics:
        print("trace-scorer: no deterministic metric has its inputs in these samples", file=sys.stderr)
    print_report(args.json, run.plan, run.results, run.groups, lines=run.lines, judge_usage=run.judge_usage)
    return EXIT_OK


def nothing_read(errors: Sequence[object], read: int) -> int | None:
    """Say which records were skipped and why; :data:`EXIT_NOTHING_READ` when no sample (of ``read``) could be."""
    for error in errors:
        print(f"trace-scorer: skipped {error}", file=sys.stderr)
    if not read:
        print("trace-scorer: no sample could be read", file=sys.stderr)
        return EXIT_NOTHING_READ
    return None


def scored_files(settings: Settings, target_name: str | None, paths: Sequence[Path]) -> ScoredFiles:
    """``score``'s reading and scoring, for ``compare`` and ``calibrate``: the plan used and every sample's
    results (with their samples). Raises FileNotFoundError for a path that does not exist."""
    from trace_scorer.metrics.registry import default_registry
    from trace_scorer.offline.scoring import score_files
    from trace_scorer.offline.targets import choose_target

    index, target = choose_target(settings, target_name) or (0, None)
    run = score_files(
        paths,
        target=target,
        index=index,
        registry=default_registry(),
        references=target.references if target else None,
        jobs=1,
        render_json=False,
        show_progress=sys.stderr.isatty(),
        settings=settings,
        keep_samples=True,
    )
    if not run.samples:
        return ScoredFiles(None, [], run.errors)
    return ScoredFiles(run.plan, run.results, run.errors)

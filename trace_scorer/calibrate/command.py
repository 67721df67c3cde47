"""``trace-scorer calibrate``: a metric's scores against human labels, from a labelled file — ``score --json``
lines with ``labels`` added, or sample files with ``metadata.labels``, scored here as ``score`` scores them.

Exit codes: 0 reported, 1 nothing could be read, 2 configuration or usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trace_scorer.calibrate.agreement import N_RESAMPLES
from trace_scorer.calibrate.analysis import Calibration, Options, calibrate
from trace_scorer.calibrate.items import LabelledSet, add_item, from_score_lines
from trace_scorer.calibrate.panels import RULES
from trace_scorer.calibrate.thresholds import OBJECTIVES
from trace_scorer.config import Settings, load_settings
from trace_scorer.data.outcomes import Failed, Score
from trace_scorer.errors import UserError
from trace_scorer.offline.command import ScoreFiles
from trace_scorer.offline.read import ReadError, find_input_files, read_records
from trace_scorer.runtime.logs import configure_logging
from trace_scorer.scoring.plan import raw_target_problems

EXIT_OK, EXIT_NOTHING_READ = 0, 1
#: Without ``--since``: labels and scores of the last this many days.
DEFAULT_SINCE = timedelta(days=90)
PANEL_FIGURES = ("kappa", "f1", "accuracy")
DEFAULT_THRESHOLD = 0.5


def add_calibrate_arguments(parser: argparse.ArgumentParser, parse_datetime: Callable[[str], datetime]) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="labelled files: score --json lines or sample files (none with --langfuse)",
    )
    parser.add_argument(
        "--langfuse",
        action="store_true",
        help="read the labels (ANNOTATION scores) and the metric's scores from Langfuse",
    )
    parser.add_argument("--label-config", nargs="+", metavar="ID", help="Langfuse: the labels' score config id(s)")
    parser.add_argument(
        "--queue",
        metavar="ID",
        help="Langfuse: only the labels on this annotation queue's items (its traces and observations)",
    )
    parser.add_argument("--since", type=parse_datetime, help="Langfuse: scores and labels since (default: 90 days)")
    parser.add_argument(
        "--push-to-queue",
        metavar="ID",
        help="put the items the judges disagree on most (with each other or the labels) into this annotation queue",
    )
    parser.add_argument("--push", type=int, default=20, metavar="N", help="items pushed at most (20)")
    parser.add_argument("--metric", required=True, help="the score name to calibrate")
    parser.add_argument("--label", help="the label's name in each item's labels (default: the metric's name)")
    parser.add_argument("--config", type=Path, help="settings file (default: ./settings.toml if present)")
    parser.add_argument("--target", help="the configured target that scores sample files (default: the only one)")
    parser.add_argument(
        "--threshold",
        type=float,
        help="the metric's verdict: correct when value ≥ this (default: the settings' pass_at_k or KPI threshold "
        f"on the metric, else {DEFAULT_THRESHOLD})",
    )
    parser.add_argument("--objective", choices=OBJECTIVES, default="f1", help="what the tuned threshold maximises")
    parser.add_argument(
        "--panel-figure", choices=PANEL_FIGURES, default="kappa", help="the agreement panels are ranked by (kappa)"
    )
    parser.add_argument("--margin", type=float, default=0.05, help="a panel within this of the best is as good")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the folds (0)")
    parser.add_argument("--resamples", type=int, default=N_RESAMPLES, help=f"bootstrap resamples ({N_RESAMPLES})")
    parser.add_argument("--json", action="store_true", help="the calibration as one JSON object")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    parser.add_argument(
        "--write", type=Path, metavar="FILE", help="write a copy of the settings with the tuned threshold to FILE"
    )
    parser.add_argument("--force", action="store_true", help="--write may replace an existing FILE")


@dataclass(frozen=True)
class ThresholdSetting:
    """Where a settings file turns the metric into a verdict: ``targets[target].<table>[index].threshold``."""

    target: int
    table: str  # "metrics" | "kpis"
    index: int
    value: float
    description: str


def threshold_setting(settings: Settings, metric: str, target_name: str | None) -> ThresholdSetting | None:
    """The first pass_at_k whose ``correct_when`` is the metric, else the first ``threshold`` KPI on it."""
    for t_index, target in enumerate(settings.targets):
        if target_name is not None and target.name != target_name:
            continue
        for m_index, entry in enumerate(target.metrics):
            options = entry.options
            if entry.metric == "pass_at_k" and options.get("correct_when", "answer_similarity") == metric:
                value = float(options.get("threshold", 0.8))
                where = f"pass_at_k's threshold in target {target.name!r}"
                return ThresholdSetting(t_index, "metrics", m_index, value, where)
        for k_index, kpi in enumerate(target.kpis):
            kpi_options = kpi.options
            if kpi.formula == "threshold" and getattr(kpi_options, "metric", None) == metric:
                value = float(getattr(kpi_options, "threshold"))  # noqa: B009 - a formula's options model
                return ThresholdSetting(t_index, "kpis", k_index, value, f"KPI {kpi.name!r} in target {target.name!r}")
    return None


def _records(paths: Sequence[Path]) -> tuple[list[Mapping[str, Any]], list[ReadError]]:
    found = find_input_files(paths)
    errors = list(found.errors)
    records: list[Mapping[str, Any]] = []
    for path in found.files:
        for record in read_records(path):
            if isinstance(record, ReadError):
                errors.append(record)
            elif not isinstance(record.data, Mapping):
                errors.append(ReadError(record.path, record.where, "expected a JSON object"))
            else:
                records.append(record.data)
    return records, errors


def _from_samples(
    settings: Settings, args: argparse.Namespace, label: str, score_files: ScoreFiles
) -> tuple[LabelledSet, list[ReadError]]:
    scored = score_files(settings, args.target, args.paths)
    found = LabelledSet(args.metric, label)
    if scored.plan is None:
        return found, scored.errors
    names = scored.plan.sample_score_names() + [k.name for k in scored.plan.sample_kpis]
    if args.metric not in names:
        raise UserError(f"--metric {args.metric!r}: the target scores {', '.join(names) or 'nothing'}")
    for result in scored.results:
        labels = result.sample.metadata.get("labels")
        outcome = result.outcomes.get(args.metric)
        add_item(
            found,
            result.sample.id,
            labels=labels.get(label) if isinstance(labels, Mapping) else None,
            value=outcome.value if isinstance(outcome, Score) else None,
            details=outcome.details if isinstance(outcome, Score | Failed) else None,
            trace_id=result.sample.trace_id,
        )
    return found, scored.errors


def _options(args: argparse.Namespace, setting: ThresholdSetting | None) -> Options:
    if args.resamples < 100:
        raise UserError(f"--resamples {args.resamples}: use at least 100 (the default is {N_RESAMPLES})")
    if not 0 <= args.margin < 1:
        raise UserError(f"--margin {args.margin}: must be at least 0 and below 1")
    if args.threshold is not None:
        threshold, source = args.threshold, "--threshold"
    elif setting is not None:
        threshold, source = setting.value, setting.description
    else:
        threshold, source = DEFAULT_THRESHOLD, "the default"
    return Options(
        threshold=threshold,
        threshold_source=source,
        objective=args.objective,
        panel_figure=args.panel_figure,
        margin=args.margin,
        seed=args.seed,
        n_resamples=args.resamples,
    )


#: What calibrate imports from the ``calibrate`` extra.
CALIBRATE_MODULES = ("sklearn", "krippendorff", "tomlkit")


def run_calibrate(args: argparse.Namespace, score_files: ScoreFiles) -> int:
    from trace_scorer.runtime.extras import require_extra

    require_extra("calibrate", CALIBRATE_MODULES, "calibrate")
    if args.html:
        from trace_scorer.calibrate.html import require_report_extra

        require_report_extra()
    settings = load_settings(args.config, check_targets=raw_target_problems)
    configure_logging(settings.log.level, settings.log.format)
    label = args.label or args.metric
    setting = threshold_setting(settings, args.metric, args.target)
    if args.write is not None:
        _check_write(args, setting)
    options = _options(args, setting)
    if args.langfuse == bool(args.paths):
        raise UserError("calibrate reads either labelled files (PATH…) or Langfuse (--langfuse), one of them")
    if not args.langfuse and (args.label_config or args.queue or args.since):
        raise UserError("--label-config, --queue and --since choose what is read from Langfuse: add --langfuse")
    if args.push < 1:
        raise UserError(f"--push {args.push}: must be 1 or more")
    if args.langfuse:
        found = asyncio.run(_from_langfuse(settings, args, label))
    else:
        read = _from_files(settings, args, label, score_files)
        if isinstance(read, int):
            return read
        found = read
    if not found.items:
        reasons = "; ".join(f"{n} {r}" for r, n in found.left_out.items()) or "no record"
        print(f"trace-scorer: no labelled item of {args.metric} could be read ({reasons})", file=sys.stderr)
        return EXIT_NOTHING_READ
    calibration = calibrate(found, options)
    if args.push_to_queue:
        asyncio.run(_push(settings, args.push_to_queue, found, calibration, args.push))
    if args.json:
        from trace_scorer.calibrate.terminal import write_json

        write_json(sys.stdout, calibration)
    else:
        from trace_scorer.calibrate.terminal import print_calibration
        from trace_scorer.offline.report import table_console

        print_calibration(table_console(), calibration)
    if args.html:
        from trace_scorer.calibrate.html import write_html

        write_html(args.html, calibration)
        print(f"trace-scorer: report written to {args.html}", file=sys.stderr)
    if args.write is not None:
        if calibration.tuning is None:
            raise UserError(f"no threshold was tuned for {args.metric}: {args.write} not written")
        assert setting is not None and args.config is not None
        write_threshold(args.config, args.write, setting, calibration.tuning.threshold)
        print(
            f"trace-scorer: wrote {args.write}: {setting.description} = {calibration.tuning.threshold:.6g}",
            file=sys.stderr,
        )
    return EXIT_OK


def _from_files(settings: Settings, args: argparse.Namespace, label: str, score_files: ScoreFiles) -> LabelledSet | int:
    try:
        records, errors = _records(args.paths)
    except FileNotFoundError as exc:
        print(f"trace-scorer: {exc}", file=sys.stderr)
        return EXIT_NOTHING_READ
    scored_lines = [r for r in records if "scores" in r]
    if scored_lines and len(scored_lines) < len(records):
        raise UserError("the files mix score --json lines (with 'scores') and samples: calibrate one kind at a time")
    if scored_lines:
        found = from_score_lines(scored_lines, args.metric, label)
    elif records:
        found, errors = _from_samples(settings, args, label, score_files)
    else:
        found = LabelledSet(args.metric, label)
    for error in errors:
        print(f"trace-scorer: skipped {error}", file=sys.stderr)
    return found


async def _from_langfuse(settings: Settings, args: argparse.Namespace, label: str) -> LabelledSet:
    from trace_scorer.calibrate.langfuse_labels import read_labelled
    from trace_scorer.langfuse import LangfuseClient

    since = args.since or datetime.now(UTC) - DEFAULT_SINCE
    async with LangfuseClient(settings.langfuse) as client:
        await client.connect()
        return await read_labelled(
            client,
            args.metric,
            label,
            config_ids=args.label_config or (),
            queue_id=args.queue,
            since=since.isoformat().replace("+00:00", "Z"),
        )


async def _push(settings: Settings, queue_id: str, found: LabelledSet, calibration: Calibration, limit: int) -> None:
    """The items the judges disagree on most into the annotation queue; what was done said on stderr and kept
    in the calibration (``pushed`` in --json)."""
    from trace_scorer.calibrate.disagreements import push, rank
    from trace_scorer.langfuse import LangfuseClient

    ranked = rank(found, threshold=calibration.options.threshold, binary=calibration.kind == "binary")
    async with LangfuseClient(settings.langfuse) as client:
        await client.connect()
        pushed = await push(client, queue_id, ranked, limit)
    calibration.pushed = pushed.as_json()
    print(
        f"trace-scorer: annotation queue {queue_id}: {len(pushed.added)} traces added, {len(pushed.already)} "
        f"already there (of {len(ranked)} items with a disagreement)"
        + (f"; {pushed.no_trace} items have no trace id" if pushed.no_trace else ""),
        file=sys.stderr,
    )


def _check_write(args: argparse.Namespace, setting: ThresholdSetting | None) -> None:
    """Before any work: --write needs a settings file holding the threshold, and a FILE it may write."""
    if args.config is None:
        raise UserError("--write copies the settings file: name it with --config")
    if setting is None:
        raise UserError(
            f"--write: {args.config} turns {args.metric} into a verdict nowhere (no pass_at_k with correct_when = "
            f"{args.metric!r}, no threshold KPI on it)"
        )
    if args.write.exists() and not args.force:
        raise UserError(f"{args.write} exists: not overwritten (--force replaces it)")


def write_threshold(config: Path, destination: Path, setting: ThresholdSetting, value: float) -> None:
    """A copy of ``config`` with the threshold replaced, comments and layout kept (tomlkit)."""
    import tomlkit

    try:
        document = tomlkit.parse(config.read_text(encoding="utf-8"))
        entry: Any = document["targets"]
        entry[setting.target][setting.table][setting.index]["threshold"] = round(value, 6)
        destination.write_text(tomlkit.dumps(document), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {destination}: {exc.strerror or exc}") from None


__all__ = ["RULES", "add_calibrate_arguments", "run_calibrate"]

"""Read and score files: the one ``score`` path of local targets, judged targets and ``compare``.

Decisions (also in the README and docs/architecture.md):

- Only targets whose metrics all compute locally (no judge, no embedder) are spread over processes
  (``jobs.py``). Judged metrics wait on the network, not the CPU, and one process keeps each provider's
  rate and concurrency limits and the judge's request cache as configured; those targets are read the
  same way, a part at a time, and scored in this process, ``REMOTE_CONCURRENCY`` samples at a time.
- Inputs under ``PARALLEL_FROM_BYTES`` run in this process: starting processes would cost more than they
  save.
- Exported observation rows and experiment items are collected while reading and extracted here once
  everything is read (a trace's rows may be anywhere in the input), then scored here, after the samples.
- Without configuration, the target is every deterministic metric whose inputs some sample has
  (``targets.py``): the parts are scored with every such candidate, and the candidates no sample had
  inputs for are dropped once all is read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from trace_scorer.config import Settings, TargetSettings
from trace_scorer.config.references import ReferenceSettings
from trace_scorer.metrics.base import Resources
from trace_scorer.metrics.registry import MetricRegistry
from trace_scorer.offline.groups import score_groups
from trace_scorer.offline.jobs import WorkerSetup, score_in_processes
from trace_scorer.offline.parts import Keep, PartResult, PartScorer
from trace_scorer.offline.progress import ScoringProgress
from trace_scorer.offline.read import FilePart, ReadError, find_input_files, split_file, trace_samples
from trace_scorer.offline.report import sample_json_line
from trace_scorer.offline.targets import (
    check_resources,
    computes_locally,
    default_candidates,
    observation_matcher,
    target_of,
)
from trace_scorer.runtime.logs import settle_logging
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import GroupResult, SampleResult
from trace_scorer.scoring.plan import TargetPlan, build_plan

if TYPE_CHECKING:
    from trace_scorer.providers.usage import Usage

#: Below this many bytes of input, everything is scored in this process. Measured on a 2-core machine:
#: forking two processes that have everything imported and stopping them costs 15-20 ms; reading and
#: scoring 1 MiB of tool-call samples (~450) takes ~35 ms of one core, so about where a second one pays.
PARALLEL_FROM_BYTES = 1 << 20
#: Bytes of JSON lines read and scored at a time (a part).
PART_BYTES = 1 << 20
#: Parts per process at least, so that a slow part does not leave the others idle at the end.
PARTS_PER_JOB = 4
#: Samples scored at once when a plan has metrics that wait on the network (judges, embedders).
REMOTE_CONCURRENCY = 32


# -- the files' parts --------------------------------------------------------------------------------


@dataclass
class OfflineRun:
    """What ``score`` prints: the plan (its columns), the results in input order, the groups, what could
    not be read; ``lines`` are the samples' JSON lines when they were written while scoring."""

    plan: TargetPlan
    target: TargetSettings
    samples: int
    results: list[SampleResult]
    lines: list[str] | None
    groups: list[GroupResult]
    errors: list[ReadError]
    #: Processes that scored (1: this one).
    jobs: int
    #: The judges' totals per model (judged targets).
    judge_usage: dict[str, Usage] = field(default_factory=dict)


def plan_parts(paths: Sequence[Path], jobs: int) -> tuple[list[FilePart], list[ReadError], int]:
    """The input's parts in order, the folders that could not be listed, and the input's size in bytes.

    Raises FileNotFoundError for a path that does not exist.
    """
    found = find_input_files(paths)
    total = 0
    for path in found.files:
        with contextlib.suppress(OSError):  # reported when read
            total += path.stat().st_size
    if jobs > 1 and total >= PARALLEL_FROM_BYTES:  # parts read by other processes: sent without their bytes
        part_bytes, keep_data = max(64 << 10, min(PART_BYTES, total // (jobs * PARTS_PER_JOB))), False
    else:
        part_bytes, keep_data = PART_BYTES, True
    parts = [part for path in found.files for part in split_file(path, part_bytes, keep_data=keep_data)[0]]
    return parts, found.errors, total


# -- scoring -----------------------------------------------------------------------------------------


def score_files(
    paths: Sequence[Path],
    *,
    target: TargetSettings | None,
    index: int,
    registry: MetricRegistry,
    references: ReferenceSettings | None,
    jobs: int,
    render_json: bool,
    show_progress: bool,
    settings: Settings | None = None,
    keep_samples: bool = False,
    log_level: str = "INFO",
    log_format: Literal["auto", "console", "json"] = "auto",
) -> OfflineRun:
    """Read and score ``paths`` with ``target`` (None: no configuration, every deterministic metric whose
    inputs some sample has). A target with judged metrics opens ``settings``' judge and embedder and is
    scored in this process; ``keep_samples``: every result keeps its sample (``compare``, ``calibrate``).

    Raises ConfigError for a target that does not plan and FileNotFoundError for a path that does not
    exist, both before anything is read.
    """
    candidates = tuple(default_candidates(registry)) if target is None else ()
    scoring = target if target is not None else target_of(c.key for c in candidates)
    if not computes_locally(scoring, registry):
        return asyncio.run(_score_remote(paths, scoring, index, registry, references, show_progress, settings))
    if settings is not None:
        check_resources(settings)  # refused as when a judged target opens them, though nothing here uses them
    plan = build_plan(scoring, index=index, registry=registry, resources=Resources())
    settle_logging()  # the metrics' modules are imported: one that logs through structlog gets it configured
    parts, errors, total = plan_parts(paths, jobs)
    render = render_json and target is not None
    keep: Keep = "all" if scoring.group_by or keep_samples else "none" if render else "shown"
    scorer = PartScorer(plan, keep, render, candidates)
    parallel = jobs > 1 and total >= PARALLEL_FROM_BYTES and len(parts) > 1

    done: list[PartResult] = []
    progress = ScoringProgress(sum(p.size for p in parts), enabled=show_progress and len(parts) > 1)

    def collect(result: PartResult) -> None:
        done.append(result)
        progress.advance(read=result.size, scored=result.samples)

    workers = 1
    if parallel:
        settings_json = scoring.model_dump(mode="json", by_alias=True, exclude_unset=True)
        setup = WorkerSetup(
            settings_json, target is None, index, registry, keep, render, candidates, log_level, log_format
        )
        workers = score_in_processes(parts, setup, jobs, collect, progress)
    else:
        with progress:
            asyncio.run(_score_here(scorer, parts, collect))
    groups = asyncio.run(_finish(scorer, done, references, scoring.group_by, observation_matcher(target)))

    for outcome in done:
        errors.extend(outcome.errors)
    results = [r for o in done for r in o.results]
    samples = sum(o.samples for o in done)
    lines = [line for o in done for line in o.lines] if render else None
    if target is not None:
        return OfflineRun(plan, target, samples, results, lines, groups, errors, workers)
    present = set().union(*(o.present for o in done))
    chosen = target_of(c.key for c in candidates if c.key in present)
    plan = build_plan(chosen, index=index, registry=registry, resources=Resources())
    results = _only(results, plan.sample_score_names())
    lines = [sample_json_line(r) for r in results] if render_json else None
    return OfflineRun(plan, chosen, samples, results, lines, groups, errors, workers)


async def _score_remote(
    paths: Sequence[Path],
    target: TargetSettings,
    index: int,
    registry: MetricRegistry,
    references: ReferenceSettings | None,
    show_progress: bool,
    settings: Settings | None,
) -> OfflineRun:
    """A target with judged metrics: read a part at a time, scored here ``REMOTE_CONCURRENCY`` at a time
    across parts, the judge and the embedder opened and closed in this loop."""
    from trace_scorer.scoring.resources import open_resources

    parts, errors, _total = plan_parts(paths, 1)
    async with contextlib.AsyncExitStack() as stack:
        resources = open_resources(settings or Settings.model_construct(), stack, tracing_default=False)
        plan = build_plan(target, index=index, registry=registry, resources=resources)
        settle_logging()  # the judge's modules log through structlog
        scorer = PartScorer(plan, "all", False, concurrency=REMOTE_CONCURRENCY)
        read = PartResult()
        progress = ScoringProgress(sum(p.size for p in parts), enabled=show_progress)  # judged: slow, always

        def samples() -> Iterator[Sample]:
            for part in parts:
                yield from scorer.read(part, read)
                progress.advance(read=part.size)

        with progress:
            async for result in scorer.pipeline.score_samples(samples(), concurrency=REMOTE_CONCURRENCY):
                scorer.add(result, read)
                progress.advance(scored=1)
        done = [read]
        groups = await _finish(scorer, done, references, target.group_by, observation_matcher(target))
        usage = resources.judge.ledger.by_model() if resources.judge is not None else {}
    results = [r for o in done for r in o.results]
    errors.extend(e for o in done for e in o.errors)
    return OfflineRun(plan, target, sum(o.samples for o in done), results, None, groups, errors, 1, dict(usage))


def _only(results: Iterable[SampleResult], names: Sequence[str]) -> list[SampleResult]:
    """The results with only the outcomes named."""
    kept = set(names)
    return [SampleResult(r.sample, {n: o for n, o in r.outcomes.items() if n in kept}, r.kpi_names) for r in results]


async def _score_here(scorer: PartScorer, parts: Sequence[FilePart], collect: Callable[[PartResult], None]) -> None:
    for part in parts:
        collect(await scorer.score_part(part))


async def _finish(
    scorer: PartScorer,
    done: list[PartResult],
    references: ReferenceSettings | None,
    group_by: str | None,
    observations: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[GroupResult]:
    """Score the samples extracted from the rows and items read (appended to ``done``), then the groups."""
    rest = PartResult()
    traces = [r for o in done for r in o.records]
    await scorer.score_samples(trace_samples(traces, rest.errors, references, observations), rest)
    done.append(rest)
    return await score_groups(scorer.pipeline, group_by, [r for o in done for r in o.results])

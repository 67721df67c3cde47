"""The offline ``score`` command's work for targets computed on this machine: read, score, in file order,
over several processes when the input is large (``--jobs``).

Why its own module: the files are read a part at a time (whole lines, ``inputs.split_file``), each
part read *and* scored where it is handed, so that parsing and validation, most of the cost, are spread
over the processes too; the results come back in input order, so the output is the same at any
``--jobs`` (``tests/unit/core/test_offline_jobs.py``).

Decisions (also in the README and docs/architecture.md):

- Only targets whose metrics all compute locally (no judge, no embedder) are spread over processes.
  Judged metrics wait on the network, not the CPU, and one process keeps each provider's rate and
  concurrency limits and the judge's request cache as configured; those targets run in one process, 32
  samples at a time (``cli._score``).
- Inputs under ``PARALLEL_FROM_BYTES`` run in this process: starting processes would cost more than they
  save. Processes are forked (Linux) so they start with everything imported; elsewhere, or when this
  process runs other threads, they are spawned.
- Exported observation rows and experiment items are collected while reading and extracted here once
  everything is read (a trace's rows may be anywhere in the input), then scored here, after the samples:
  the order ``load_inputs`` gives.
- Without configuration, the target is every deterministic metric whose inputs some sample has: the
  parts are scored with every such candidate, and the candidates no sample had inputs for are dropped
  once all is read (the same result as choosing first, without reading the input twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from trace_scorer.config import MetricEntry, Settings, TargetSettings
from trace_scorer.config.references import ReferenceSettings
from trace_scorer.config.targets import ALL_SAMPLES
from trace_scorer.extract import index_items, looks_like_experiment_item, looks_like_observation_row, samples_from_rows
from trace_scorer.inputs import FilePart, ReadError, Record, find_input_files, sample_from_record, split_file
from trace_scorer.logs import configure_logging
from trace_scorer.metrics.base import Resources
from trace_scorer.metrics.registry import MetricClass, MetricRegistry
from trace_scorer.outcomes import Failed, Score
from trace_scorer.pipeline import GroupResult, Pipeline, SampleResult
from trace_scorer.plan import TargetPlan, build_plan
from trace_scorer.providers.keys import check_provider_names
from trace_scorer.report import sample_json_line, sample_notes
from trace_scorer.resources import open_resources
from trace_scorer.sample import Sample

#: Below this many bytes of input, everything is scored in this process. Measured on a 2-core machine:
#: forking two processes that have everything imported and stopping them costs 15-20 ms; reading and
#: scoring 1 MiB of tool-call samples (~450) takes ~35 ms of one core, so about where a second one pays.
PARALLEL_FROM_BYTES = 1 << 20
#: Bytes of JSON lines read and scored at a time (a part).
PART_BYTES = 1 << 20
#: Parts per process at least, so that a slow part does not leave the others idle at the end.
PARTS_PER_JOB = 4


def default_jobs() -> int:
    """All the cores this process may use."""
    count = os.process_cpu_count() if hasattr(os, "process_cpu_count") else None  # Python 3.13+
    if count is None and hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    return count or os.cpu_count() or 1


# -- which metrics, without configuration ------------------------------------------------------------


def default_candidates(registry: MetricRegistry) -> list[MetricClass]:
    """The metrics ``score`` uses without configuration, if their inputs are there: deterministic,
    per-sample, and usable with default options."""
    candidates = []
    for cls in registry.classes():
        if cls.per_group or not cls.deterministic():
            continue
        try:
            cls.Options.model_validate({})
        except ValidationError:
            continue  # needs options that only a configuration can give
        candidates.append(cls)
    return candidates


def has_inputs(cls: MetricClass, sample: Sample) -> bool:
    return all(getattr(sample, name) is not None for name in cls.requires)


def target_of(keys: Iterable[str]) -> TargetSettings:
    """The target of the metrics ``keys`` (no configuration)."""
    metrics = [MetricEntry(metric=k) for k in keys]
    # model_construct: a configured target must name metrics, but "none of them applies" is a valid
    # outcome here (the table then lists the samples and says why nothing was scored).
    return TargetSettings.model_construct(name="default", metrics=metrics)


def default_target(samples: Sequence[Sample], registry: MetricRegistry) -> TargetSettings:
    """Without configuration: every deterministic per-sample metric whose inputs some sample has."""
    return target_of(c.key for c in default_candidates(registry) if any(has_inputs(c, s) for s in samples))


def check_resources(settings: Settings) -> None:
    """Raise ConfigError for a judge or embedder configuration that ``score`` refuses (a missing API key, a
    provider named twice…), as when they are opened for a judged target, though no local metric uses them.

    Opened and closed at once, and only what is configured: with no provider listing chat models and no
    embedding model, ``build_judge`` and ``build_embedder`` only check the provider names and return None
    (after importing openai and the retry policy: 0.4 s that this spares).
    """
    chat = any(provider.chat_models for provider in settings.providers)
    embeddings = settings.embeddings.model is not None or any(p.embedding_models for p in settings.providers)
    if not (chat or embeddings):
        check_provider_names(settings)
        return

    async def open_and_close() -> None:
        async with contextlib.AsyncExitStack() as stack:
            open_resources(settings, stack, tracing_default=False)

    asyncio.run(open_and_close())


def computes_locally(target: TargetSettings, registry: MetricRegistry) -> bool:
    """Whether no metric of ``target`` needs a judge or an embedder (an unknown one is the plan's to report)."""
    classes = [registry.get(entry.metric) for entry in target.metrics]
    return all(cls is None or cls.deterministic() for cls in classes)


# -- groups ------------------------------------------------------------------------------------------


def group_key(sample: Sample, field: str) -> str | None:
    """The group ``sample`` belongs to under ``group_by = field`` (None: in no group)."""
    if field == ALL_SAMPLES:
        return "all"
    if field.startswith("metadata."):
        value = sample.metadata.get(field.removeprefix("metadata."))
    else:
        value = getattr(sample, field, None)
    return None if value is None else str(value)


async def score_groups(pipeline: Pipeline, group_by: str | None, results: Sequence[SampleResult]) -> list[GroupResult]:
    """Run-level results per group of ``results`` (first-seen order), or none without ``group_by``."""
    if not group_by:
        return []
    members: dict[str, list[SampleResult]] = {}
    for result in results:
        key = group_key(result.sample, group_by)
        if key is not None:
            members.setdefault(key, []).append(result)
    return [await pipeline.score_group(key, group) for key, group in members.items()]


# -- scoring parts -----------------------------------------------------------------------------------

#: What a part keeps of each sample's result: nothing (its JSON line is enough), what the table and the
#: JSON lines show (id, notes, values and reasons), or everything (groups read the samples).
Keep = Literal["none", "shown", "all"]


@dataclass
class PartResult:
    """What reading and scoring one part gave, in input order."""

    samples: int = 0
    results: list[SampleResult] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)
    #: Observation rows and experiment items: extracted once everything is read.
    records: list[Record] = field(default_factory=list)
    #: Keys of the candidate metrics whose inputs some sample of the part has (without configuration).
    present: set[str] = field(default_factory=set)
    size: int = 0


def _shown(result: SampleResult) -> SampleResult:
    """The result without what no output shows (the sample's fields, comments, details): lighter to keep
    for the table and to send between processes."""
    outcomes = {
        name: Score(o.value) if isinstance(o, Score) else Failed(o.reason) if isinstance(o, Failed) else o
        for name, o in result.outcomes.items()
    }
    sample = Sample.model_construct(id=result.sample.id, notes=sample_notes(result))  # with what was cut
    return SampleResult(sample, outcomes, result.kpi_names)


@dataclass
class PartScorer:
    """Reads parts and scores their samples with one plan, in this process."""

    plan: TargetPlan
    keep: Keep
    #: Write each sample's JSON line while scoring (the output is JSON and its metrics are settled).
    render: bool
    candidates: Sequence[MetricClass] = ()

    def __post_init__(self) -> None:
        self.pipeline = Pipeline(self.plan)

    async def score_part(self, part: FilePart) -> PartResult:
        """Each record read, validated and scored before the next is read: what is not kept dies young,
        which keeps the garbage collector's work small (it was a third of the time when a part's samples
        were all read first)."""
        out = PartResult(size=part.size)
        for record in part.records():
            if isinstance(record, ReadError):
                out.errors.append(record)
            elif looks_like_observation_row(record.data) or looks_like_experiment_item(record.data):
                out.records.append(record)
            elif isinstance(sample := sample_from_record(record), ReadError):
                out.errors.append(sample)
            else:
                await self.score_sample(sample, out)
        return out

    async def score_samples(self, samples: Iterable[Sample], out: PartResult) -> PartResult:
        for sample in samples:
            await self.score_sample(sample, out)
        return out

    async def score_sample(self, sample: Sample, out: PartResult) -> None:
        result = await self.pipeline.score_sample(sample)
        out.samples += 1
        for cls in self.candidates:
            if cls.key not in out.present and has_inputs(cls, sample):
                out.present.add(cls.key)
        if self.render:
            out.lines.append(sample_json_line(result))
        if self.keep == "all":
            out.results.append(result)
        elif self.keep == "shown":
            out.results.append(_shown(result))


# -- one process or several --------------------------------------------------------------------------

_worker: tuple[PartScorer, asyncio.AbstractEventLoop] | None = None


@dataclass(frozen=True)
class _WorkerSetup:
    """What a process needs to score parts (sent to spawned processes: every field pickles, so the
    target travels as its settings, validated again there; KPI entry classes are made at run time)."""

    target: dict[str, Any]
    #: The target was made without configuration (``target_of``): rebuilt the same way.
    default: bool
    index: int
    registry: MetricRegistry
    keep: Keep
    render: bool
    candidates: tuple[MetricClass, ...]
    log_level: str
    log_format: Literal["auto", "console", "json"]
    forked: bool


def _start_worker(setup: _WorkerSetup) -> None:
    global _worker
    if not setup.forked:  # a forked process has the parent's logging already
        configure_logging(setup.log_level, setup.log_format)
    if setup.default:
        target = target_of(entry["metric"] for entry in setup.target["metrics"])
    else:
        target = TargetSettings.model_validate(setup.target)
    plan = build_plan(target, index=setup.index, registry=setup.registry, resources=Resources())
    scorer = PartScorer(plan, setup.keep, setup.render, setup.candidates)
    _worker = (scorer, asyncio.new_event_loop())
    gc.freeze()  # what exists now (modules, the plan) lives as long as the process: no collection looks at it


def _score_in_worker(part: FilePart) -> PartResult:
    assert _worker is not None, "the process was not set up"
    scorer, loop = _worker
    return loop.run_until_complete(scorer.score_part(part))


def _context() -> multiprocessing.context.BaseContext:
    """fork where it is safe (Linux, no other thread): processes start with everything imported."""
    if sys.platform == "linux" and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


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
    log_level: str = "INFO",
    log_format: Literal["auto", "console", "json"] = "auto",
) -> OfflineRun:
    """Read and score ``paths`` with ``target`` (None: no configuration), whose metrics compute locally.

    Raises ConfigError for a target that does not plan and FileNotFoundError for a path that does not
    exist, both before anything is read.
    """
    candidates = tuple(default_candidates(registry)) if target is None else ()
    scoring = target if target is not None else target_of(c.key for c in candidates)
    plan = build_plan(scoring, index=index, registry=registry, resources=Resources())
    parts, errors, total = plan_parts(paths, jobs)
    render = render_json and target is not None
    keep: Keep = "all" if scoring.group_by else "none" if render else "shown"
    scorer = PartScorer(plan, keep, render, candidates)
    parallel = jobs > 1 and total >= PARALLEL_FROM_BYTES and len(parts) > 1

    done: list[PartResult] = []
    progress = _progress(show_progress and len(parts) > 1)
    task = progress.add_task("scoring", total=sum(p.size for p in parts) or None, samples=0)

    def collect(result: PartResult) -> None:
        done.append(result)
        progress.update(task, advance=result.size, samples=sum(o.samples for o in done))

    if parallel:
        context = _context()
        forked = context.get_start_method() == "fork"
        settings = scoring.model_dump(mode="json", by_alias=True, exclude_unset=True)
        setup = _WorkerSetup(
            settings, target is None, index, registry, keep, render, candidates, log_level, log_format, forked
        )
        workers = min(jobs, len(parts))
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(setup,)) as pool:
            scored = pool.map(_score_in_worker, parts)  # every process is forked here, before any thread
            with progress:
                for result in scored:
                    collect(result)
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
        return OfflineRun(plan, target, samples, results, lines, groups, errors, workers if parallel else 1)
    present = set().union(*(o.present for o in done))
    chosen = target_of(c.key for c in candidates if c.key in present)
    plan = build_plan(chosen, index=index, registry=registry, resources=Resources())
    results = _only(results, plan.sample_score_names())
    lines = [sample_json_line(r) for r in results] if render_json else None
    return OfflineRun(plan, chosen, samples, results, lines, groups, errors, workers if parallel else 1)


def observation_matcher(target: TargetSettings | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """A target of scope "observation": which exported rows are each one sample; otherwise None (one
    sample per trace). The filter's module is imported only then: it loads the Langfuse adapter."""
    if target is None or target.scope != "observation":
        return None
    from trace_scorer.langfuse.observation_filter import ObservationFilter

    chosen = ObservationFilter.of(target)
    return chosen.matches if chosen is not None else None


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
    records = [r for o in done for r in o.records]
    rows = [r.data for r in records if looks_like_observation_row(r.data)]
    items = [r for r in records if not looks_like_observation_row(r.data)]
    if rows or items:
        by_trace, problems = index_items(item.data for item in items)
        for position, reason in problems:
            rest.errors.append(ReadError(items[position].path, items[position].where, reason))
        samples = samples_from_rows(rows, items=by_trace, references=references, observations=observations)
        await scorer.score_samples(samples, rest)
    done.append(rest)
    return await score_groups(scorer.pipeline, group_by, [r for o in done for r in o.results])


def _progress(enabled: bool) -> Progress:
    """Per part, on stderr, only in a terminal: it costs nothing per sample."""
    return Progress(
        TextColumn("scoring"),
        BarColumn(),
        TextColumn("{task.fields[samples]} samples"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=True,
    )

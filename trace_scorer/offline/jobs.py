"""Scoring parts over several processes (``score --jobs``), results in input order.

Why: parsing and validation are most of the cost, so each part is read *and* scored where it is handed;
the results come back in input order, so the output is the same at any ``--jobs``
(``tests/unit/core/test_offline_jobs.py``). Only targets whose metrics all compute locally come here:
judged metrics wait on the network, and one process keeps each provider's limits and the judge's cache.
Processes are forked (Linux) so they start with everything imported; elsewhere, or when this process
runs other threads, they are spawned.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Literal

from trace_scorer.config import TargetSettings
from trace_scorer.metrics.base import Resources
from trace_scorer.metrics.registry import MetricClass, MetricRegistry
from trace_scorer.offline.parts import Keep, PartResult, PartScorer
from trace_scorer.offline.read import FilePart
from trace_scorer.offline.targets import target_of
from trace_scorer.runtime.logs import configure_logging
from trace_scorer.scoring.plan import build_plan


def default_jobs() -> int:
    """All the cores this process may use."""
    count = os.process_cpu_count() if hasattr(os, "process_cpu_count") else None  # Python 3.13+
    if count is None and hasattr(os, "sched_getaffinity"):
        count = len(os.sched_getaffinity(0))
    return count or os.cpu_count() or 1


_worker: tuple[PartScorer, asyncio.AbstractEventLoop] | None = None


@dataclass(frozen=True)
class WorkerSetup:
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
    forked: bool = True


def _start_worker(setup: WorkerSetup) -> None:
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


def score_in_processes(
    parts: Sequence[FilePart],
    setup: WorkerSetup,
    jobs: int,
    collect: Callable[[PartResult], None],
    progress: AbstractContextManager[Any],
) -> int:
    """Score ``parts`` in ``jobs`` processes at most, handing each part's result to ``collect`` in input
    order; the number of processes started. ``progress`` is entered once the processes are forked (its
    display runs a thread)."""
    context = _context()
    setup = replace(setup, forked=context.get_start_method() == "fork")
    workers = min(jobs, len(parts))
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(setup,)) as pool:
        scored = pool.map(_score_in_worker, parts)  # every process is forked here, before any thread
        with progress:
            for result in scored:
                collect(result)
    return workers

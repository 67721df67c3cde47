"""Benchmark: issue #29 item 3 — the worker's CPU per trace for a deterministic target on v4.

``trace-scorer run`` (its own process) over a backlog of ``--traces`` production traces on the Langfuse
stand-in (4.16.0, its own process, 20 ms a request), target: ``tool_call_accuracy``, ``rouge`` and one KPI
(``weighted_sum`` of both), no LLM. The worker's CPU (user + system, ``/proc/<pid>/stat``) from the end of
its start-up until every trace was seen, per scored trace, and traces/s per core; ``--repeat`` runs, the
median. ``--profile FILE`` records the last run with py-spy (``pip install py-spy``; 200 Hz, raw folded
stacks) for where the time goes. ``--code DIR`` runs another copy of the package (the figures before).

    PYTHONPATH=. python bench/bench_deterministic.py [--traces 5000] [--repeat 3] [--profile FILE] [--code DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import bench_worker
from bench.bench_worker import DETERMINISTIC, run_worker

KPIS = [{"name": "quality", "formula": "weighted_sum", "weights": {"tool_call_accuracy": 0.6, "rouge": 0.4}}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--code", help="a directory holding another trace_scorer package to run")
    args = parser.parse_args(argv)
    if args.code:
        bench_worker.EXTRA_PYTHONPATH = str(Path(args.code).resolve())
    figures = []
    for n in range(args.repeat):
        run = run_worker(
            generation="v4",
            traces=args.traces,
            metrics=DETERMINISTIC,
            llm_latency=None,
            worker_settings={},
            llm_concurrency=16,
            timeout=1800,
            label="deterministic",
            target_options={"kpis": KPIS},
            profile=args.profile if n == args.repeat - 1 else None,
        )
        ms = run.cpu_ms_per_trace()
        figures.append(ms)
        print(
            f"run {n + 1}: {run.scored} traces, worker CPU {ms:.3f} ms a trace ({1000 / ms:.0f} traces/s per core), "
            f"start-up {run.startup_cpu:.2f} s apart, wall {run.wall:.1f} s, "
            f"reads {100 * run.reads() / max(run.scored, 1):.2f} and score posts "
            f"{100 * run.posts() / max(run.scored, 1):.2f} per 100 traces, peak RSS {run.peak_rss_mb:.0f} MB",
            flush=True,
        )
    median = statistics.median(figures)
    print(f"median of {len(figures)}: {median:.3f} ms a trace, {1000 / median:.0f} traces/s per core", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

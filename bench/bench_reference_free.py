"""The shipped settings on a generated production corpus (no references): which scores each trace gets,
and the CPU time per trace of the reference-free checks (issue 26).

Run: ``python bench/bench_reference_free.py`` (options: ``--traces``, ``--fault-rate``, ``--seed``,
``--repeat``). Renders production traces with the stand-in's generator (every SDK format it knows, its
usual agent deviations, production faults at ``--fault-rate``: a repeated call, a wrong argument type,
a failed tool, an answer cut off), as the v4 stand-in serves them (the body field groups the worker
reads), extracts each once, then scores them with the shipped ``settings.toml`` target, counting per
score how many traces got a value and why the others were skipped. CPU time (``process_time``, one
process) is measured per trace for: extraction; the reference-free checks alone; the whole shipped
target — median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.generate import Corpus, Scenario
from standins.langfuse_query import project
from standins.langfuse_server import _truncate_metadata
from trace_scorer.config import load_settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.extract import extract_sample
from trace_scorer.langfuse.reads.v4 import BODY_FIELDS
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan

ROOT = Path(__file__).resolve().parents[1]
#: What a check's value flags as a problem (the "flagged" column).
FLAGGED = {
    "tool_call_validity": lambda v: v < 1,
    "tool_errors": lambda v: v > 0,
    "tool_loops": lambda v: v > 0,
    "answer_completeness": lambda v: v < 1,
}
CHECKS = ("tool_call_validity", "tool_errors", "tool_loops", "answer_completeness",
          "latency", "total_tokens", "total_cost", "tool_call_count")  # fmt: skip


def corpus_rows(traces: int, fault_rate: float, seed: int) -> list[list[dict[str, object]]]:
    scenario = Scenario(seed=seed, traces=traces, datasets=(), fault_rate=fault_rate, topics_rate=0.0)
    corpus = Corpus(scenario)
    out = []
    for trace_id in corpus.expected_scored():
        header = corpus.find(trace_id)
        assert header is not None
        out.append([_truncate_metadata(project(r.row, BODY_FIELDS), set()) for r in corpus.render(header).records])
    return out


async def score(pipeline: Pipeline, samples: list[Sample]) -> list[dict[str, object]]:
    return [dict((await pipeline.score_sample(s)).outcomes) for s in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--fault-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--config", type=Path, default=ROOT / "settings.toml", help="the settings (default: shipped)")
    args = parser.parse_args()

    rows = corpus_rows(args.traces, args.fault_rate, args.seed)
    shipped = load_settings(args.config, environ={}).targets[0]
    entries = [m.model_dump() for m in shipped.metrics if m.metric in CHECKS]
    full = Pipeline(build_plan(shipped))
    only_checks = TargetSettings.model_validate({"name": "checks", "metrics": entries}) if entries else None
    checks = Pipeline(build_plan(only_checks)) if only_checks is not None else full

    extract_times, check_times, full_times = [], [], []
    samples: list[Sample] = []
    outcomes: list[dict[str, object]] = []
    for _ in range(args.repeat):
        start = time.process_time()
        samples = [extract_sample(r) for r in rows]
        extract_times.append(time.process_time() - start)
        start = time.process_time()
        outcomes = asyncio.run(score(full, samples))
        full_times.append(time.process_time() - start)
        start = time.process_time()
        asyncio.run(score(checks, samples))
        check_times.append(time.process_time() - start)

    n = len(samples)
    print(f"{n} production traces (fault rate {args.fault_rate}, seed {args.seed}), shipped target {shipped.name!r}")
    print(f"{'score':22} {'scored':>7} {'skipped':>8} {'mean':>9} {'flagged':>8}  most common skip reason")
    names = list(outcomes[0]) if outcomes else []
    for name in names:
        got = [o[name] for o in outcomes]
        scored = sum(isinstance(x, Score) for x in got)
        reasons = Counter(x.reason for x in got if isinstance(x, Skipped))
        top = reasons.most_common(1)[0][0][:60] if reasons else ""
        values = [x.value for x in got if isinstance(x, Score)]
        mean = f"{statistics.fmean(values):.4g}" if values else "–"
        flagged = str(sum(FLAGGED[name](v) for v in values)) if name in FLAGGED else ""
        print(f"{name:22} {scored:>7} {sum(reasons.values()):>8} {mean:>9} {flagged:>8}  {top}")
    any_scored = sum(any(isinstance(x, Score) for x in o.values()) for o in outcomes)
    print(f"traces with at least one score: {any_scored} of {n}")
    for label, times in (("extraction", extract_times), ("reference-free checks", check_times),
                         ("whole shipped target", full_times)):  # fmt: skip
        print(f"CPU per trace, {label}: {statistics.median(times) / n * 1e6:.0f} µs (median of {args.repeat})")


if __name__ == "__main__":
    main()

"""scope = "observation" (issue 26): Langfuse requests per 100 scored observations, CPU per scored
observation, and which scores the shipped settings give traces and observations of a production corpus
without references.

Run: ``python bench/bench_observations.py`` (options: ``--traces``, ``--cpu-traces``, ``--repeat``,
``--seed``). The corpus is the stand-in generator's production traces made the way the SDK integrations
make them (``standins.formats.SDK_FORMATS``: the openai wrapper alone and in an agent loop, ``@observe``,
LangChain with and without agents, OTel GenAI), with its usual deviations and production faults.

1. **Requests** — the worker's observation source (the real one, in this process, as ``open_context``
   builds it) works through a backlog of ``--traces`` traces on the loopback Langfuse stand-in playing
   4.60, 4.16 and 2.95, once with ``types = ["GENERATION"]`` (on v4 the trace reads ask the server for
   generations only) and once with ``types = ["TOOL"]`` (whole traces read), the deterministic checks of
   the shipped target: GET requests (start-up's left out) and score posts per 100 scored observations;
   the rows the server sent per scored observation; the trace scope on the same traces beside it.
2. **CPU** — per scored observation (``process_time``, one process, median of ``--repeat``): building the
   observation samples from rows already read, and the shipped target's deterministic metrics on them.
3. **The shipped settings** — the first target of ``settings.toml`` on ``--cpu-traces`` traces, at trace
   scope and at observation scope (generations; tools): per score how many got a value, how many were
   skipped and the most common reason.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.formats import SDK_FORMATS
from standins.generate import Corpus, Scenario
from standins.handles import start_langfuse
from standins.langfuse_query import project
from standins.langfuse_server import LangfuseOptions, _truncate_metadata
from standins.worker import backlog_timing, load_worker_settings, production_target, worker_environment
from trace_scorer.config import load_settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.extract import extract_sample
from trace_scorer.extract.observations import observation_samples
from trace_scorer.langfuse.reads.v4 import BODY_FIELDS
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.ops import Ops
from trace_scorer.runtime.logs import configure_logging
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan
from trace_scorer.worker.observations import observation_filter
from trace_scorer.worker.service import open_context
from trace_scorer.worker.tick import TickReport

ROOT = Path(__file__).resolve().parents[1]
#: Requests made once at start-up (connection check, generation probe, score configs).
STARTUP_ROUTES = ("/health", "/projects", "/score-configs", "/experiments")
SCORE_ROUTES = ("POST /api/public/scores", "POST /api/public/ingestion")


def scenario(traces: int, seed: int) -> Scenario:
    end = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0)
    return Scenario(
        seed=seed, traces=traces, spacing=1.0, end=end.isoformat(), datasets=(), formats=SDK_FORMATS, fault_rate=0.3
    )


def shipped_target() -> TargetSettings:
    return load_settings(ROOT / "settings.toml", environ={}).targets[0]


def deterministic_entries(target: TargetSettings) -> list[dict[str, Any]]:
    plan = build_plan(target)
    keep = {m.name for m in plan.sample_metrics if m.deterministic()}
    return [m.model_dump(exclude_none=True) for m in target.metrics if (m.name or m.metric) in keep]


def count(requests: dict[str, dict[str, int]], *, posts: bool) -> int:
    total = 0
    for label, outcomes in requests.items():
        verb, path = label.split(" ", 1)
        startup = any(path.endswith(p) or f"{p}/" in path for p in STARTUP_ROUTES)
        wanted = label in SCORE_ROUTES if posts else verb == "GET" and not startup
        if wanted:
            total += sum(outcomes.values())
    return total


def requests_run(version: str, traces: int, seed: int, metrics: list[dict[str, Any]], **scope: Any) -> dict[str, Any]:
    """One backlog through the real source in this process; the stand-in counts requests and rows."""
    corpus_scenario = scenario(traces, seed)
    with start_langfuse(LangfuseOptions(version=version, scenario=corpus_scenario)) as lf:
        target = production_target(metrics, **backlog_timing(corpus_scenario), **scope)
        workdir = Path(tempfile.mkdtemp(prefix="bench-observations-"))
        env = worker_environment(lf, targets=[target], state_path=workdir / "state.db", inherit=False)
        settings = load_worker_settings(env)
        report = TickReport("production")

        async def work() -> None:
            ops = Ops.from_settings(settings.http.model_copy(update={"enabled": False}))
            async with AsyncExitStack() as stack:
                context = await open_context(settings, stack, ops=ops)
                before = lf.request_counts()
                rows_before = lf.stats().get("rows_served", 0)
                source = context.sources["production"]
                tick = await source.tick(datetime.now(UTC), asyncio.Event())
                report.scored, report.skipped = tick.scored, tick.skipped
                report.seen = tick.seen
                after = lf.request_counts()
                rows = lf.stats().get("rows_served", 0) - rows_before
                diff = {k: {o: n - before.get(k, {}).get(o, 0) for o, n in v.items()} for k, v in after.items()}
                result.update(requests=diff, rows=rows)

        result: dict[str, Any] = {}
        asyncio.run(work())
        result.update(scored=report.scored, seen=report.seen, stored=lf.score_summary()["stored"])
        return result


def outcome_table(label: str, outcomes: list[dict[str, Any]]) -> None:
    n = len(outcomes)
    print(f"\n{label}: {n} samples")
    print(f"  {'score':22} {'scored':>7} {'skipped':>8} {'mean':>9}  most common skip reason")
    names = list(dict.fromkeys(name for o in outcomes for name in o))
    for name in names:
        got = [o[name] for o in outcomes if name in o]
        scored = sum(isinstance(x, Score) for x in got)
        reasons = Counter(x.reason for x in got if isinstance(x, Skipped))
        top = reasons.most_common(1)[0][0][:60] if reasons else ""
        values = [x.value for x in got if isinstance(x, Score)]
        mean = f"{statistics.fmean(values):.4g}" if values else "–"
        print(f"  {name:22} {scored:>7} {sum(reasons.values()):>8} {mean:>9}  {top}")
    any_scored = sum(any(isinstance(x, Score) for x in o.values()) for o in outcomes)
    print(f"  with at least one score: {any_scored} of {n}")


async def score_all(pipeline: Pipeline, samples: list[Sample]) -> list[dict[str, Any]]:
    return [dict((await pipeline.score_sample(s)).outcomes) for s in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=300, help="backlog of the request counts")
    parser.add_argument("--cpu-traces", type=int, default=2000, help="corpus of the CPU and score tables")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip", default="", help="comma-separated: requests,cpu,shipped")
    args = parser.parse_args()
    configure_logging("WARNING")  # the worker's per-tick lines would drown the figures
    skip = set(args.skip.split(",")) - {""}
    shipped = shipped_target()
    checks = deterministic_entries(shipped)

    if "requests" not in skip:
        print(f"1. Langfuse requests, {args.traces} traces ({', '.join(SDK_FORMATS)}), metrics: the shipped")
        print("   target's deterministic ones; per 100 scored samples (observations, or traces for scope trace)")
        print(f"   {'server':8} {'scope':28} {'scored':>7} {'reads':>7} {'posts':>7} {'rows/sample':>12}")
        for version in ("4.60.0", "4.16.0", "2.95.12"):
            for label, scope in (
                ("observation GENERATION", {"scope": "observation"}),
                ("observation TOOL", {"scope": "observation", "observations": {"types": ["TOOL"]}}),
                ("trace", {}),
            ):
                run = requests_run(version, args.traces, args.seed, checks, **scope)
                scored = max(run["scored"], 1)
                reads = count(run["requests"], posts=False) * 100 / scored
                posts = count(run["requests"], posts=True) * 100 / scored
                rows = f"{run['rows'] / scored:.1f}" if run["rows"] else "–"
                print(f"   {version:8} {label:28} {run['scored']:>7} {reads:>7.1f} {posts:>7.1f} {rows:>12}")

    rows = []
    if skip != {"cpu", "shipped"}:
        corpus = Corpus(scenario(args.cpu_traces, args.seed))
        for trace_id in corpus.expected_scored():
            header = corpus.find(trace_id)
            assert header is not None
            served = [_truncate_metadata(project(r.row, BODY_FIELDS), set()) for r in corpus.render(header).records]
            rows.append((trace_id, served))
    generations = TargetSettings.model_validate({"name": "gens", "scope": "observation", "metrics": checks})
    tools = TargetSettings.model_validate(
        {"name": "tools", "scope": "observation", "observations": {"types": ["TOOL"]}, "metrics": checks}
    )

    if "cpu" not in skip:
        wanted = observation_filter(generations).matches
        pipeline = Pipeline(build_plan(generations))
        build_times, score_times, trace_times = [], [], []
        samples: list[Sample] = []
        for _ in range(args.repeat):
            start = time.process_time()
            samples = [s for trace_id, r in rows for s in observation_samples(r, wanted, trace_id=trace_id)]
            build_times.append(time.process_time() - start)
            start = time.process_time()
            asyncio.run(score_all(pipeline, samples))
            score_times.append(time.process_time() - start)
            start = time.process_time()
            for trace_id, r in rows:
                extract_sample(r, trace_id=trace_id)
            trace_times.append(time.process_time() - start)
        n = len(samples)
        print(f"\n2. CPU per scored observation: {n} generations of {len(rows)} traces, median of {args.repeat}")
        print(f"   building the samples from read rows: {statistics.median(build_times) / n * 1e6:.0f} µs")
        print(f"   the shipped deterministic metrics:   {statistics.median(score_times) / n * 1e6:.0f} µs")
        print(
            f"   (a whole trace's extraction, scope trace: {statistics.median(trace_times) / len(rows) * 1e6:.0f} µs)"
        )

    if "shipped" not in skip:
        print(f"\n3. The shipped settings.toml target {shipped.name!r} on {len(rows)} traces without references")
        full = Pipeline(build_plan(shipped))
        trace_samples = [extract_sample(r, trace_id=t) for t, r in rows]
        outcome_table("scope trace", asyncio.run(score_all(full, trace_samples)))
        for label, target in (("scope observation, GENERATION", generations), ("scope observation, TOOL", tools)):
            wanted = observation_filter(target).matches
            samples = [s for trace_id, r in rows for s in observation_samples(r, wanted, trace_id=trace_id)]
            outcome_table(label, asyncio.run(score_all(full, samples)))


if __name__ == "__main__":
    main()

"""Benchmark: issue #22 items 2, 7 and 8 — a worker's time, requests and memory on oversized input.

Each case runs the real worker (``python -m trace_scorer run``, its own process) against the Langfuse
stand-in (its own process, v4 4.16.0, ``--latency`` a request: 20 ms; 3 s is a heavy page's time on a
busy ClickHouse, the scale of the issue's 389 s), deterministic metrics only, with the shipped
defaults (nothing of this issue is configured), until every trace was seen by a tick or ``--timeout``:

- ``wide`` (item 2): 109 traces a second apart; trace 100 has 100,000 more observations (made as they
  are served). Traces scored other than the wide one, seconds until all were, observation requests and
  rows served, and what ``/healthz`` answered (polled every 2 s: failures, the longest idle it reported).
- ``dense`` (item 7): ``--dense`` traces (default 50,000) in one hour: one window held them all. Peak RSS.
  ``trace_slack`` 5 s (the generated rows lie within their root's span; the default 5 minutes would make
  each batch's scan read ten minutes of a dense hour's rows).
- ``huge`` (item 8): 100 traces, one with an observation of ``--huge-mb`` MB (default 150). Peak RSS.

``--code DIR`` runs the worker from another copy of the package (e.g. ``git archive <commit> trace_scorer |
tar -x -C DIR``): the figures before a change.

    PYTHONPATH=. python bench/bench_bounded.py wide|dense|huge [--code DIR] [--latency 0.02] [--timeout 600]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_worker import DETERMINISTIC, LogFollower, wait_for_start
from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import PRODUCTION_REFERENCES, WorkerProcess, backlog_timing, production_target, worker_environment

OBSERVATIONS = "GET /api/public/v2/observations"


@dataclass
class Result:
    case: str
    code: str
    traces: int
    seen: int = 0
    scored_traces: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    observation_requests: int = 0
    rows_served: int = 0
    healthz_polls: int = 0
    healthz_failed: int = 0
    healthz_longest_idle: float = 0.0
    healthz_reasons: list[str] = field(default_factory=list)
    #: Seconds until the first trace was scored (polled every 2 s; ``wide`` only).
    first_scored_seconds: float | None = None


def scenario(case: str, args: argparse.Namespace) -> Scenario:
    end = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0).isoformat()
    common: dict[str, Any] = {"seed": 7, "end": end, "references_rate": 1.0, "datasets": ()}
    if case == "wide":
        return Scenario(traces=109, spacing=1.0, wide_trace=100, wide_rows=100_000, **common)
    if case == "dense":
        return Scenario(traces=args.dense, spacing=3600 / args.dense, **common)
    return Scenario(traces=100, spacing=1.0, huge_row_trace=50, huge_row_bytes=args.huge_mb * 1_000_000, **common)


def healthz(port: int) -> tuple[bool, float, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            body = json.loads(answer.read())
            ok = True
    except urllib.error.HTTPError as error:
        body = json.loads(error.read() or b"{}")
        ok = False
    except OSError as error:
        return False, 0.0, f"no answer: {error}"
    idle = max((t.get("idle_seconds", 0.0) for t in body.get("targets", {}).values()), default=0.0)
    return ok, float(idle), str(body.get("reason", ""))


def ops_port(worker: WorkerProcess) -> int | None:
    for event in worker.events("ops_server_started"):
        return int(event["port"])
    return None


def run(case: str, args: argparse.Namespace) -> Result:
    sc = scenario(case, args)
    options = LangfuseOptions(
        version="4.16.0",
        scenario=sc,
        faults=FaultConfig(latency=args.latency),
        validate_answers="sample",
        keep_score_details=False,
    )
    result = Result(case, args.code or "this checkout", sc.traces)
    with start_langfuse(options, mode="process") as lf:
        target = production_target(DETERMINISTIC, references=PRODUCTION_REFERENCES, **backlog_timing(sc))
        langfuse: dict[str, Any] = {"api_generation": "v4"}
        if case == "dense":
            # The generated traces' rows lie within their root's span: with the default 5-minute slack, each
            # batch of a dense hour would scan ten minutes of everyone's rows (~8,000 traces') for 200 traces.
            langfuse["trace_slack"] = "5s"
        env = worker_environment(lf, None, targets=[target], langfuse_settings=langfuse)
        if args.code:
            env["PYTHONPATH"] = os.pathsep.join([str(Path(args.code).resolve()), env["PYTHONPATH"]])
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-bounded-{case}-"))
        with WorkerProcess(["run"], env=env, workdir=workdir) as worker:
            wait_for_start(worker.log_path, worker.running)
            started = time.monotonic()
            follower = LogFollower(worker.log_path)
            deadline = started + args.timeout
            port = None
            while time.monotonic() < deadline and worker.running():
                follower.poll()
                port = port or ops_port(worker)
                if port is not None:
                    ok, idle, reason = healthz(port)
                    result.healthz_polls += 1
                    result.healthz_longest_idle = max(result.healthz_longest_idle, idle)
                    if not ok:
                        result.healthz_failed += 1
                        if len(result.healthz_reasons) < 2:  # the first, and the last below
                            result.healthz_reasons.append(reason)
                        else:
                            result.healthz_reasons[-1] = reason
                if case == "wide":  # (a dense backlog's scores are too many to list every 2 s)
                    result.scored_traces = len({s["traceId"] for s in lf.scores()})
                    if result.scored_traces and result.first_scored_seconds is None:
                        result.first_scored_seconds = time.monotonic() - started
                if follower.seen() >= sc.traces:
                    break
                time.sleep(2.0)
            follower.poll()
            result.seconds = time.monotonic() - started
            result.seen = follower.seen()
            result.scored_traces = len({s["traceId"] for s in lf.scores()})
            result.peak_rss_mb = worker.peak_rss_mb
            worker.terminate()
        result.observation_requests = lf.count(OBSERVATIONS)
        result.rows_served = int(lf.stats().get("rows_served", 0))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["wide", "dense", "huge"])
    parser.add_argument("--code", help="a directory holding another trace_scorer package to run")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the stand-in takes per request")
    parser.add_argument("--dense", type=int, default=50_000)
    parser.add_argument("--huge-mb", type=int, default=150)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.case, args)
    text = json.dumps(result.__dict__, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

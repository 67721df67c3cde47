"""Benchmark: ``trace-scorer backfill`` with a slow judge (issue #22, item 3) — when do traces' scores
reach Langfuse?

The Langfuse stand-in (v4) holds ``--traces`` finished production traces; the OpenAI stand-in answers
every request after ``--latency`` seconds (and ``--rate-5xx`` of them with a 503, retried), 4 requests
at a time (the provider's ``max_concurrency``). The target scores agent_goal_accuracy (two judge calls a
trace). Printed: from the first judge request, when the first, the tenth and the last trace's scores
were stored, and the judge requests made. Before the fix every score arrived at the end of the batch.

    PYTHONPATH=. python bench/bench_slow_judge.py [--traces 40] [--latency 3] [--rate-5xx 0.3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import WorkerProcess, production_target, worker_environment

METRIC, SLOTS = "agent_goal_accuracy", 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=40)
    parser.add_argument("--latency", type=float, default=3.0, help="seconds before each judge answer")
    parser.add_argument("--rate-5xx", type=float, default=0.0, help="share of judge requests answered 503")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()

    end = (datetime.now(UTC) - timedelta(minutes=2)).isoformat()
    scenario = Scenario(seed=11, traces=args.traces, spacing=1.0, end=end, datasets=())
    faults = FaultConfig(latency=args.latency, rate_5xx=args.rate_5xx, seed=5)
    with (
        start_langfuse(LangfuseOptions(version="4.60.0", scenario=scenario), mode="thread") as langfuse,
        start_openai(OpenAIOptions(faults=faults), mode="thread") as llm,
    ):
        target = production_target([METRIC], lag="0s", quiet_period="0s", lookback="1h")
        workdir = Path(tempfile.mkdtemp(prefix="bench-slow-judge-"))
        env = worker_environment(langfuse, llm, targets=[target], llm_concurrency=SLOTS, state_path=workdir / "s.db")
        since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        stored: dict[str, float] = {}
        first_call: float | None = None
        with WorkerProcess(["backfill", "--target", "production", "--from", since], env=env, workdir=workdir) as run:
            started = time.monotonic()
            while run.running() and time.monotonic() - started < args.timeout:
                now = time.monotonic()
                if first_call is None and llm.count("/v1/chat/completions") > 0:
                    first_call = now
                for score in langfuse.scores(name=METRIC):
                    stored.setdefault(str(score["traceId"]), now)
                time.sleep(0.5)  # a benchmark's sampling interval
            code = run.wait(10)
        if first_call is None or not stored:
            print(f"exit {code}: no judge request or no score\n{run.log()[-3000:]}")
            return
        times = sorted(t - first_call for t in stored.values())
        tenth = times[min(9, len(times) - 1)]
        print(
            f"exit {code}; {len(times)} traces' scores stored; from the first judge request: first at "
            f"{times[0]:.1f} s, tenth at {tenth:.1f} s, last at {times[-1]:.1f} s (±0.5 s sampling); "
            f"{llm.count('/v1/chat/completions')} judge requests"
        )


if __name__ == "__main__":
    main()

"""Reads per 100 sessions (``scope = "session"``) against the Langfuse stand-in, v4 and 2.95 (issue 26).

Run: ``PYTHONPATH=. python bench/bench_sessions.py`` (options: ``--sessions``, ``--turns``, ``--versions``,
``--backlog``). A chat corpus (``--turns`` traces per session, a minute apart, every SDK format the
generator knows) is scored by the worker in process with the time stepped a minute a tick (the stand-in
shows rows by that time) until every session went quiet and was scored — live: a session becomes ready
about every ``--turns`` minutes; ``--backlog``: the worker starts after the last session went quiet, so
its first ticks find all of them ready. Then the same corpus with ``scope = "trace"`` for comparison.
Prints, per version and scope, the requests by route, the reads (GET requests to Langfuse but the
health check) per 100 sessions, and how many scores were stored.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.generate import Scenario
from standins.handles import start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import load_worker_settings, production_target, worker_environment
from trace_scorer.ops import Ops
from trace_scorer.worker.service import open_context

END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SPACING = 60.0


@dataclass
class Clock:
    at: datetime

    def now(self) -> datetime:
        return self.at


def run(
    version: str, scope: str, sessions: int, turns: int, workdir: Path, *, backlog: bool
) -> tuple[dict[str, int], int]:
    traces = sessions * turns
    scenario = Scenario(seed=5, traces=traces, spacing=SPACING, session_turns=turns, end=END.isoformat(), datasets=())
    first = END - timedelta(seconds=SPACING * (traces + 1)) - timedelta(minutes=2)
    clock = Clock(END + timedelta(minutes=10) if backlog else first)
    lf = start_langfuse(LangfuseOptions(version=version, scenario=scenario, clock=clock.now))
    target = production_target(
        ["latency", "tool_call_count", "tool_errors"],
        scope=scope,
        session_quiet="5m",
        lookback=f"{int((END - first).total_seconds()) + 1200}s" if backlog else "10m",
        lag="1m",
        quiet_period="1m",
        filter={"environments": ["production"]},
    )
    env = worker_environment(lf, targets=[target], state_path=workdir / f"{version}-{scope}.db", inherit=False)
    settings = load_worker_settings(env)

    async def simulate() -> None:
        ops = Ops.from_settings(settings.http.model_copy(update={"enabled": False}))
        async with AsyncExitStack() as stack:
            context = await open_context(settings, stack, ops=ops)
            source = context.sources["production"]
            stop = asyncio.Event()
            while clock.at < END + timedelta(minutes=30):
                await source.tick(clock.at, stop)
                clock.at += timedelta(minutes=1)

    try:
        asyncio.run(simulate())
        counts = {label: sum(outcomes.values()) for label, outcomes in lf.request_counts().items()}
        return counts, int(lf.score_summary()["stored"])
    finally:
        lf.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--versions", nargs="+", default=["4.16.0", "2.95.12"])
    parser.add_argument("--backlog", action="store_true", help="start once every session went quiet")
    args = parser.parse_args()
    mode = "a backlog" if args.backlog else "live"
    print(
        f"{args.sessions} sessions of {args.turns} turns ({args.sessions * args.turns} traces), {mode}, a tick a minute"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for version in args.versions:
            for scope in ("session", "trace"):
                counts, stored = run(version, scope, args.sessions, args.turns, Path(tmp), backlog=args.backlog)
                reads = {k: v for k, v in counts.items() if k.startswith("GET") and "/health" not in k}
                total = sum(reads.values())
                print(f"\n{version}, scope = {scope}: {stored} scores stored; reads {total}, "
                      f"{total * 100 / args.sessions:.0f} per 100 sessions")  # fmt: skip
                for label, count in sorted(counts.items(), key=lambda kv: -kv[1]):
                    print(f"  {count:6d}  {label}")


if __name__ == "__main__":
    main()

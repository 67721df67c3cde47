"""The worker against the Langfuse stand-in in real-server mode, with time stepped through hours of live
traffic (in process: the worker's ticks get the simulated time, the stand-in shows rows by it).

- Langfuse v4 shows a trace's root only once it *ended* (spans are exported at their end): production
  traces that run 1–20 minutes, spread over two hours, each appear long after the window holding their
  start was read. Every one must be scored exactly once.
- The same data through a 4.16 server (ingestion score events: its POST /scores takes no list) and a
  4.60 server (POST /scores lists) must end with identical stored scores.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from standins.generate import Corpus, Scenario
from standins.handles import start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import PRODUCTION_REFERENCES, load_worker_settings, production_target, worker_environment
from trace_scorer.ops import Ops
from trace_scorer.worker.service import open_context

pytestmark = pytest.mark.slow

#: Two hours of traces, one every 45 s, each running 1 to 20 minutes.
TRACES = 160
SPACING = 45.0
DURATION = (60.0, 1200.0)
TICK = timedelta(minutes=1)


@dataclass
class SimulatedClock:
    at: datetime

    def now(self) -> datetime:
        return self.at


def scenario(end: datetime) -> Scenario:
    return Scenario(
        seed=31,
        traces=TRACES,
        spacing=SPACING,
        end=end.isoformat(),
        trace_duration=DURATION,
        references_rate=1.0,
        datasets=(),
    )


def run_live(version: str, tmp_path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any], Corpus]:
    """Tick every simulated minute from before the first trace to well after the last one ended."""
    end = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    corpus_scenario = scenario(end)
    clock = SimulatedClock(end - timedelta(seconds=SPACING * (TRACES + 1)) - timedelta(minutes=2))
    lf = start_langfuse(LangfuseOptions(version=version, scenario=corpus_scenario, clock=clock.now))
    target = production_target(
        ["tool_call_accuracy", "rouge"],
        references=PRODUCTION_REFERENCES,
        lookback="10m",
        lag="2m",
        quiet_period="3m",
        filter={"environments": ["production"]},
    )
    workdir = tmp_path / version
    workdir.mkdir()
    env = worker_environment(lf, targets=[target], state_path=workdir / "state.db", inherit=False)
    settings = load_worker_settings(env)

    async def simulate() -> None:
        ops = Ops.from_settings(settings.http.model_copy(update={"enabled": False}))
        async with AsyncExitStack() as stack:
            context = await open_context(settings, stack, ops=ops)
            source = context.sources["production"]
            stop = asyncio.Event()
            finish = end + timedelta(seconds=DURATION[1]) + timedelta(minutes=15)
            while clock.at < finish:
                await source.tick(clock.at, stop)
                clock.at += TICK

    try:
        asyncio.run(simulate())
        stored = {s["id"]: s for s in lf.scores()}
        return stored, lf.score_summary(), Corpus(corpus_scenario)
    finally:
        problems = lf.violations()
        lf.stop()
        assert not problems, problems


def test_traces_lasting_up_to_20_minutes_are_each_scored_exactly_once_on_4_16_and_4_60(tmp_path: Path) -> None:
    runs = {version: run_live(version, tmp_path) for version in ("4.16.0", "4.60.0")}
    for version, (stored, summary, corpus) in runs.items():
        expected = set(corpus.expected_scored())
        scored = {s["traceId"] for s in stored.values()}
        assert scored == expected, f"{version}: missed {len(expected - scored)}, extra {len(scored - expected)}"
        names = {(s["traceId"], s["name"]) for s in stored.values()}
        assert len(names) == len(stored) == 2 * len(expected), version  # both metrics, once each
        assert not summary["duplicates"] and summary["writes"] == len(stored), (version, summary)
    old, new = (runs[v][0] for v in ("4.16.0", "4.60.0"))

    def comparable(score: dict[str, Any]) -> tuple[Any, ...]:
        keys = ("traceId", "name", "value", "dataType", "comment", "metadata", "environment", "configId")
        return (*(str(score.get(k)) for k in keys), score["timestamp"][:23])

    assert old.keys() == new.keys()
    differing = [i for i in old if comparable(old[i]) != comparable(new[i])]
    assert not differing, [(comparable(old[i]), comparable(new[i])) for i in differing[:3]]

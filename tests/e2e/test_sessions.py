"""``scope = "session"`` end to end against the Langfuse stand-in in 4.16, 4.60 and 2.95 modes, time
stepped minute by minute (in process: the worker's ticks get the simulated time, the stand-in shows rows
by it).

A chat application records one trace per turn, grouped by ``sessionId``. Each session must be scored once
it is quiet, once per score name, on the right object (4.x: the session, no ``traceId``; 2.95, which
refuses a score without ``traceId``: the session's first trace, the session in the metadata); a session
that grows after it was scored is scored again, the same scores overwritten (no duplicate).
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from standins.generate import Corpus, Scenario
from standins.handles import ThreadedLangfuse, start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import load_worker_settings, production_target, worker_environment
from trace_scorer.ops import Ops
from trace_scorer.worker.service import open_context

pytestmark = pytest.mark.slow

TRACES = 24
TURNS = 4
SPACING = 60.0
TICK = timedelta(minutes=1)
END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
METRICS = ["latency", "tool_call_count"]


@dataclass
class SimulatedClock:
    at: datetime

    def now(self) -> datetime:
        return self.at


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def new_turn(session_id: str, start: datetime, seconds: float = 8.0) -> list[dict[str, Any]]:
    """One more turn of a chat: a root span and the generation that answered, calling one tool."""
    trace_id = f"late-{session_id}"
    end = start + timedelta(seconds=seconds)
    common = {
        "traceId": trace_id,
        "projectId": "proj-standin",
        "sessionId": session_id,
        "environment": "production",
        "userId": "u-1",
    }
    root = {
        **common,
        "id": f"{trace_id}-root",
        "type": "AGENT",
        "name": "chat-turn",
        "traceName": "chat-turn",
        "isRootObservation": True,
        "parentObservationId": None,
        "startTime": iso(start),
        "endTime": iso(end),
        "input": json.dumps({"question": "and tomorrow?"}),
        "output": json.dumps("Tomorrow: sunny."),
        "metadata": {},
    }
    generation = {
        **common,
        "id": f"{trace_id}-gen",
        "type": "GENERATION",
        "name": "chat",
        "isRootObservation": False,
        "parentObservationId": root["id"],
        "startTime": iso(start + timedelta(seconds=1)),
        "endTime": iso(end - timedelta(seconds=1)),
        "input": json.dumps([{"role": "user", "content": "and tomorrow?"}]),
        "output": json.dumps(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-late",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"day": "tomorrow"})},
                    }
                ],
            }
        ),
        "metadata": {},
    }
    return [root, generation]


async def tick_until(source: Any, clock: SimulatedClock, finish: datetime) -> None:
    stop = asyncio.Event()
    while clock.at < finish:
        await source.tick(clock.at, stop)
        clock.at += TICK


def subject_of(score: dict[str, Any], version: str) -> str:
    """The session a stored score is for, checking it is attached as this version must attach it."""
    if version.startswith("2."):  # 2.95 drops score metadata: the comment names the session
        assert score.get("traceId") and not score.get("sessionId"), score
        return str(score["comment"]).removeprefix("session ").partition(":")[0]
    assert score.get("sessionId") and not score.get("traceId"), score
    assert score["metadata"]["session_id"] == score["sessionId"], score
    return str(score["sessionId"])


def run_sessions(version: str, tmp_path: Path) -> None:
    scenario = Scenario(seed=41, traces=TRACES, spacing=SPACING, session_turns=TURNS, end=END.isoformat(), datasets=())
    corpus = Corpus(scenario)
    sessions = corpus.expected_sessions()
    clock = SimulatedClock(END - timedelta(seconds=SPACING * (TRACES + 1)) - timedelta(minutes=2))
    lf = start_langfuse(LangfuseOptions(version=version, scenario=scenario, clock=clock.now))
    assert isinstance(lf, ThreadedLangfuse)
    target = production_target(
        METRICS,
        scope="session",
        session_quiet="5m",
        lookback="10m",
        lag="1m",
        filter={"environments": ["production"]},
    )
    env = worker_environment(lf, targets=[target], state_path=tmp_path / f"{version}.db", inherit=False)
    settings = load_worker_settings(env)

    async def simulate() -> dict[str, dict[str, Any]]:
        ops = Ops.from_settings(settings.http.model_copy(update={"enabled": False}))
        async with AsyncExitStack() as stack:
            context = await open_context(settings, stack, ops=ops)
            source = context.sources["production"]
            await tick_until(source, clock, END + timedelta(minutes=15))
            before = {s["id"]: s for s in lf.scores()}
            # The first session grows: one more turn, well after it went quiet and was scored.
            grown = next(iter(sessions))
            lf.add_traces(new_turn(grown, clock.at - timedelta(minutes=1)))
            await tick_until(source, clock, clock.at + timedelta(minutes=15))
            return before

    try:
        before = asyncio.run(simulate())
        after = {s["id"]: s for s in lf.scores()}
        summary = lf.score_summary()
    finally:
        problems = lf.violations()
        lf.stop()
    assert not problems, problems

    # Before the growth: every session scored once per metric, on the right object.
    by_subject = {(subject_of(s, version), s["name"]) for s in before.values()}
    assert by_subject == {(session, name) for session in sessions for name in METRICS}, version
    assert len(before) == len(by_subject), version
    if version.startswith("2."):
        first_traces = {session: trace_ids[0] for session, trace_ids in sessions.items()}
        assert all(s["traceId"] == first_traces[subject_of(s, version)] for s in before.values())
    counts = {subject_of(s, version): s["value"] for s in before.values() if s["name"] == "tool_call_count"}
    assert all(counts[session] >= 0 for session in sessions)

    # After: the grown session's scores overwritten in place (same ids), nothing added, nothing duplicated.
    assert after.keys() == before.keys(), version
    assert not summary["duplicates"], summary
    grown = next(iter(sessions))
    for score_id, score in after.items():
        session = subject_of(score, version)
        if session == grown:
            assert score["_writes"] == 2, score
            if score["name"] == "tool_call_count":
                assert score["value"] == before[score_id]["value"] + 1
            if score["name"] == "latency":
                assert score["value"] > before[score_id]["value"]
        else:
            assert score["_writes"] == 1, score


@pytest.mark.parametrize("version", ["4.16.0", "4.60.0", "2.95.12"])
def test_sessions_scored_once_quiet_and_again_when_grown(version: str, tmp_path: Path) -> None:
    run_sessions(version, tmp_path)

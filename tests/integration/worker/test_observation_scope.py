"""scope = "observation" on the in-process stand-in: each matching observation of a finished trace is one
sample; its scores land on that observation (traceId + observationId) on 4.60, 4.16, 3.120 and 2.95; a
trace's observations are posted together and recorded in the ledger together; nothing is posted twice."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.fixtures import MakeLangfuse
from tests.support.langfuse_factories import Reply
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import FLAKY, MakeHarness, agent_trace, traces_target
from trace_scorer.langfuse import ScoreSubject, score_id
from trace_scorer.worker.traces import NOTHING_MATCHED

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def two_generation_trace(trace_id: str, clock: FakeClock, *, minutes_ago: float = 30) -> list[dict[str, Any]]:
    """The agent trace of the worker tests plus a final generation: two GENERATIONs and a TOOL."""
    start = clock.now() - timedelta(minutes=minutes_ago)
    rows = agent_trace(trace_id, start)
    generation = next(r for r in rows if r["type"] == "GENERATION")
    generation["input"] = json.dumps({"messages": json.loads(generation["input"]), "tools": TOOLS})
    final = {
        **generation,
        "id": f"{trace_id}-final",
        "startTime": (start + timedelta(seconds=3)).isoformat().replace("+00:00", "Z"),
        "endTime": (start + timedelta(seconds=4)).isoformat().replace("+00:00", "Z"),
        "output": json.dumps({"role": "assistant", "content": "It is 18 °C in Tokyo."}),
    }
    return [*rows, final]


def observation_target(**overrides: Any) -> dict[str, Any]:
    options: dict[str, Any] = {
        "scope": "observation",
        "references": {},
        "metrics": [{"metric": "tool_call_validity"}, {"metric": "answer_completeness"}, {"metric": "test_flaky"}],
        "kpis": [],
    }
    return traces_target(**{**options, **overrides})


def by_subject(lf: InProcessLangfuse) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    return {(s["traceId"], s.get("observationId"), s["name"]): s for s in lf.scores.values()}


async def test_each_generation_is_scored_on_its_observation_and_a_rerun_posts_nothing(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    v4.add_rows(*two_generation_trace("t1", clock), *two_generation_trace("t2", clock, minutes_ago=29))
    h = await harness(observation_target())
    context = await h.open()
    report = await h.tick(context)

    assert report.scored == 4  # two generations in each of two traces
    stored = by_subject(v4)
    observations = {(t, o) for t, o, _ in stored}
    assert observations == {("t1", "t1-gen"), ("t1", "t1-final"), ("t2", "t2-gen"), ("t2", "t2-final")}
    assert stored[("t1", "t1-gen", "tool_call_validity")]["value"] == 1.0  # its call names a declared tool
    assert ("t1", "t1-final", "tool_call_validity") not in stored  # no call: skipped, nothing posted
    assert stored[("t1", "t1-final", "answer_completeness")]["value"] == 1.0
    assert stored[("t1", "t1-gen", "answer_completeness")]["value"] == 0.0  # ended on a call
    score = stored[("t1", "t1-gen", "test_flaky")]
    assert score["id"] == score_id(ScoreSubject.trace("t1", "t1-gen"), "test_flaky")
    assert score["id"] != score_id(ScoreSubject.trace("t1"), "test_flaky")

    # The server was asked for generations only (their samples need no other row), and checked again here.
    reads = [c.request.url.params for c in v4.calls_to("GET", "/api/public/v2/observations")]
    body_reads = [p for p in reads if "traceId" in p]
    assert body_reads and all(json.loads(p["filter"])[0]["value"] == ["GENERATION"] for p in body_reads)

    posted = sum(len(p) for p in v4.score_posts)
    clock.elapsed += 600
    again = await h.tick(context)
    assert again.scored == 0 and sum(len(p) for p in v4.score_posts) == posted


async def test_a_trace_with_one_failed_observation_is_retried_whole_without_duplicates(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    v4.add_rows(*two_generation_trace("t1", clock))
    FLAKY.add("t1-final")  # the judge failed on one observation
    h = await harness(observation_target(retry_after="1m"))
    context = await h.open()
    report = await h.tick(context)
    assert report.failed == 1 and report.scored == 1
    assert "t1" in context.state.failed_subjects("agent", ["t1"])
    assert context.state.scored_hashes("agent", ["t1"]) == {}  # not in the ledger: retried whole
    assert ("t1", "t1-final", "test_flaky") not in by_subject(v4)

    FLAKY.clear()
    clock.elapsed += 120
    retried = await h.tick(context)
    assert retried.scored == 2
    stored = by_subject(v4)
    assert stored[("t1", "t1-final", "test_flaky")]["value"] == 1.0
    assert len(stored) == len(v4.scores)  # one score per (observation, name): the re-post overwrote
    assert context.state.scored_hashes("agent", ["t1"]) == {"t1": context.plans["agent"].config_hash}


async def test_a_trace_is_recorded_only_once_every_observation_s_scores_arrived(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """3 scores a request: the first generation's 3 scores fill one, the second's go in the next. The
    second request fails: the trace stays out of the ledger (the first observation's scores are in
    Langfuse, the second's not), and the next tick posts both again, as overwrites."""
    from trace_scorer.worker.batch import LangfuseUnavailable

    v4.add_rows(*two_generation_trace("t1", clock))
    requests: list[int] = []

    async def second_fails(request: Any, params: dict[str, str]) -> Reply:
        requests.append(len(request.json()))
        if len(requests) == 2:
            return f.error("down", 503)
        return await v4.standin_answer(request)

    v4.on("POST", "/api/public/scores", second_fails)
    h = await harness(observation_target())
    langfuse = h.settings.langfuse
    retry = langfuse.retry.model_copy(update={"max_attempts": 1})
    h.settings = h.settings.model_copy(
        update={"langfuse": langfuse.model_copy(update={"score_batch_size": 3, "retry": retry})}
    )
    context = await h.open()
    with pytest.raises(LangfuseUnavailable):
        await h.tick(context)
    assert requests[:2] == [3, 2]
    assert context.state.scored_hashes("agent", ["t1"]) == {}  # half delivered: not done
    assert {o for _, o, _ in by_subject(v4)} == {"t1-gen"}

    report = await h.tick(context)
    assert report.scored == 2
    assert len(v4.scores) == 5  # 3 + 2, the first three overwritten, none twice
    assert context.state.scored_hashes("agent", ["t1"]) == {"t1": context.plans["agent"].config_hash}


async def test_tools_by_name_pattern_and_level(harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock) -> None:
    rows = two_generation_trace("t1", clock)
    tool = next(r for r in rows if r["type"] == "TOOL")
    tool["level"], tool["statusMessage"] = "ERROR", "upstream timeout"
    v4.add_rows(*rows, *two_generation_trace("t2", clock, minutes_ago=29))  # t2's tool did not fail
    target = observation_target(
        observations={"types": ["TOOL"], "name_pattern": "^get_", "levels": ["ERROR"]},
        metrics=[{"metric": "tool_errors"}, {"metric": "tool_call_validity"}],
    )
    h = await harness(target)
    context = await h.open()
    report = await h.tick(context)
    stored = by_subject(v4)
    assert set(stored) == {("t1", "t1-tool", "tool_errors"), ("t1", "t1-tool", "tool_call_validity")}
    assert stored[("t1", "t1-tool", "tool_errors")]["value"] == 1.0
    # validated against the tools of the generation that asked for it
    assert stored[("t1", "t1-tool", "tool_call_validity")]["value"] == 1.0
    assert report.skipped[NOTHING_MATCHED] == 1  # t2: recorded as done, read no more
    assert "t2" in context.state.scored_hashes("agent", ["t2"])
    # TOOL samples need no descendants dropped: whole traces are read (no row filter sent).
    reads = [c.request.url.params for c in v4.calls_to("GET", "/api/public/v2/observations")]
    assert all("filter" not in p for p in reads if "traceId" in p)


@pytest.mark.parametrize("version", ["4.16.0", "3.120.0", "2.95.12"])
async def test_scores_land_on_the_observation_through_score_events(
    harness: MakeHarness, make_langfuse: MakeLangfuse, clock: FakeClock, version: str
) -> None:
    lf = make_langfuse(version)
    lf.add_rows(*two_generation_trace("t1", clock))
    h = await harness(observation_target(metrics=[{"metric": "answer_completeness"}]))
    context = await h.open()
    await h.tick(context)
    events = [e["body"] for e in lf.events]
    assert {(e["traceId"], e.get("observationId")) for e in events} == {("t1", "t1-gen"), ("t1", "t1-final")}
    stored = by_subject(lf)
    assert stored[("t1", "t1-final", "answer_completeness")]["value"] == 1.0
    assert stored[("t1", "t1-gen", "answer_completeness")]["value"] == 0.0
    clock.elapsed += 600
    await h.tick(context)
    assert len(lf.events) == len(events)  # nothing posted twice


async def test_a_window_scan_asks_for_generations_only_too(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """More traces than ``per_trace_fetch_max``: their rows come from one scan of the window, which asks
    for generations only as the per-trace reads do."""
    for index in range(5):
        v4.add_rows(*two_generation_trace(f"t{index}", clock, minutes_ago=30 - index))
    h = await harness(observation_target())
    context = await h.open()
    report = await h.tick(context)
    assert report.scored == 10
    scans = [
        c.request.url.params
        for c in v4.calls_to("GET", "/api/public/v2/observations")
        if "traceId" not in c.request.url.params
        and c.request.url.params.get("isRootObservation") != "true"
        and "filter" in c.request.url.params
        and "isRootObservation" not in c.request.url.params["filter"]
    ]
    assert scans and all(
        json.loads(p["filter"])
        == [{"type": "stringOptions", "column": "type", "operator": "any of", "value": ["GENERATION"]}]
        for p in scans
    )
    assert {o for _, o, _ in by_subject(v4)} == {f"t{i}-{k}" for i in range(5) for k in ("gen", "final")}


async def test_an_exact_name_narrows_the_reads_and_other_names_are_not_scored(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    rows = two_generation_trace("t1", clock)
    next(r for r in rows if r["id"] == "t1-final")["name"] = "summarise"
    v4.add_rows(*rows)
    h = await harness(observation_target(observations={"types": ["GENERATION"], "name_pattern": "^OpenAI-generation$"}))
    context = await h.open()
    await h.tick(context)
    assert {o for _, o, _ in by_subject(v4)} == {"t1-gen"}
    reads = [c.request.url.params for c in v4.calls_to("GET", "/api/public/v2/observations")]
    (body,) = [p for p in reads if "traceId" in p]
    assert {"type": "string", "column": "name", "operator": "=", "value": "OpenAI-generation"} in json.loads(
        body["filter"]
    )


async def test_metrics_count_observations_under_their_own_name(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """An observation is not a trace: ``observations_scored_total`` counts the generations scored,
    ``observations_skipped_total`` those whose every metric was skipped; traces are seen as traces."""
    v4.add_rows(*two_generation_trace("t1", clock))
    only_calls = observation_target(metrics=[{"metric": "tool_call_validity"}])
    h = await harness(only_calls)
    context = await h.open()
    report = await h.tick(context)
    telemetry = context.ops.telemetry
    report.count_skipped(telemetry)
    value = telemetry.registry.get_sample_value
    agent = {"target": "agent"}
    # t1-gen made a call (scored); t1-final made none (tool_call_validity skipped: nothing to score).
    assert value("trace_scorer_observations_scored_total", agent) == 1
    assert value("trace_scorer_observations_skipped_total", {**agent, "reason": "nothing_to_score"}) == 1
    assert value("trace_scorer_traces_scored_total", agent) is None
    assert value("trace_scorer_traces_skipped_total", {**agent, "reason": "nothing_to_score"}) is None
    assert value("trace_scorer_traces_seen_total", agent) == 1

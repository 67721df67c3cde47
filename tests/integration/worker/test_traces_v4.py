"""The production-trace source end to end on Langfuse v4: tick → scores posted, idempotently."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import FLAKY, GATES, MakeHarness, agent_trace, traces_target
from trace_scorer.langfuse import ScoreSubject, score_id
from trace_scorer.worker.traces import BATCHES_IN_FLIGHT


def seed(
    v4: InProcessLangfuse, clock: FakeClock, *trace_ids: str, minutes_ago: float = 30, **kw: Any
) -> list[dict[str, Any]]:
    """Agent traces starting ``minutes_ago`` (a second apart), added to the server; their rows."""
    rows = []
    for index, trace_id in enumerate(trace_ids):
        start = clock.now() - timedelta(minutes=minutes_ago) + timedelta(seconds=index)
        rows += agent_trace(trace_id, start, **kw)
    v4.add_rows(*rows)
    return rows


def trace_scores(v4: InProcessLangfuse, trace_id: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in v4.scores.values() if s.get("traceId") == trace_id}


async def test_tick_scores_finished_traces_and_moves_the_watermark(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    rows = seed(v4, clock, "t-ok")
    seed(v4, clock, "t-wrong-city", city="Kyoto")
    h = await harness()
    context = await h.open()
    report = await h.tick(context)

    assert (report.seen, report.scored, report.failed) == (2, 2, 0)
    ok = trace_scores(v4, "t-ok")
    assert {n: s["value"] for n, s in ok.items()} == {
        "tool_call_accuracy": 1.0,
        "rouge": ok["rouge"]["value"],
        "test_flaky": 1.0,
        "quality": ok["quality"]["value"],
    }
    assert trace_scores(v4, "t-wrong-city")["tool_call_accuracy"]["value"] == 0.0
    tca = ok["tool_call_accuracy"]
    assert tca["id"] == score_id(ScoreSubject.trace("t-ok"), "tool_call_accuracy")
    # Deterministic timestamp: the trace's start time, not the time of scoring.
    root = next(r for r in rows if r["id"] == "t-ok-root")
    assert tca["timestamp"].startswith(root["startTime"][:19])
    assert tca["metadata"]["config_hash"] == context.plans["agent"].config_hash
    assert tca["metadata"]["target"] == "agent"
    assert tca["comment"].startswith("1/1 reference calls matched")
    assert tca["environment"] == "production"
    assert tca["configId"]  # score configs were created at start-up and are used
    assert context.state.watermark("agent") == clock.now() - timedelta(minutes=2)


async def test_unfinished_and_recent_traces_wait_and_hold_the_watermark(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "t-old")
    # Not ended: a v4 server does not show its root yet (OTel exports a span when it ends).
    seed(v4, clock, "t-running", minutes_ago=20, ended=False)
    seed(v4, clock, "t-just-ended", minutes_ago=4, duration=60)  # ended 3 minutes ago < quiet period of 5
    h = await harness()
    context = await h.open()
    report = await h.tick(context)
    assert report.scored == 1 and report.deferred == 1
    running_start = clock.now() - timedelta(minutes=20)
    watermark = context.state.watermark("agent")
    # v4 reads max_trace_duration behind the watermark again: the running trace stays within reach.
    assert watermark is not None and watermark - timedelta(seconds=3600) <= running_start < watermark

    # The running trace finishes (and shows up); ten minutes later both are scored, t-old is not posted again.
    v4.replace_trace(agent_trace("t-running", running_start, duration=19 * 60))
    posts_before = sum(len(p) for p in v4.score_posts)
    clock.elapsed += 600
    report = await h.tick(context)
    assert report.scored == 2
    assert sum(len(p) for p in v4.score_posts) - posts_before == 8  # 2 traces × 4 scores, none for t-old
    posted_for_old = [s for post in v4.score_posts for s in post if s["traceId"] == "t-old"]
    assert len(posted_for_old) == 4  # once, in the first tick


async def test_restart_posts_nothing_twice_and_misses_nothing(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "t1", "t2", "t3")
    h = await harness()
    first = await h.open()
    await h.tick(first)
    posted = sum(len(p) for p in v4.score_posts)
    assert posted == 12

    seed(v4, clock, "t4", minutes_ago=1)  # starts after the watermark, while the worker is down
    clock.elapsed += 600
    first.state.close()  # the first worker is gone (and its lock on the state file with it)
    restarted = await h.open()  # same state file
    report = await h.tick(restarted)
    assert report.scored == 1
    assert sum(len(p) for p in v4.score_posts) == posted + 4
    assert {s["traceId"] for s in v4.scores.values()} == {"t1", "t2", "t3", "t4"}
    assert len(v4.scores) == 16  # exactly one score per (trace, name)


async def test_configuration_change_rescores_with_the_same_ids(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "t1")
    h = await harness()
    first = await h.open()
    await h.tick(first)
    first.state.close()  # stopped before the restart with the new configuration
    before = {s["id"]: s for s in v4.scores.values()}

    changed = traces_target(
        metrics=[{"metric": "tool_call_accuracy"}, {"metric": "rouge", "variant": "rouge1"}, {"metric": "test_flaky"}]
    )
    h2 = await harness(changed)
    h2.settings = h2.settings.model_copy(update={"state": h.settings.state})
    context = await h2.open()
    # The watermark already passed t1: the ledger, not the window, says it must be re-scored.
    context.state.set_watermark("agent", clock.now() - timedelta(hours=1))
    report = await h2.tick(context)
    assert report.scored == 1
    after = {s["id"]: s for s in v4.scores.values()}
    assert set(after) == set(before)  # overwritten, not added
    assert (
        after[score_id(ScoreSubject.trace("t1"), "rouge")]["metadata"]["config_hash"]
        == context.plans["agent"].config_hash
    )
    assert (
        before[score_id(ScoreSubject.trace("t1"), "rouge")]["metadata"]["config_hash"]
        != context.plans["agent"].config_hash
    )


async def test_sampling_is_deterministic(harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock) -> None:
    ids = [f"trace-{i:03d}" for i in range(40)]
    seed(v4, clock, *ids)
    h = await harness(traces_target(sample_rate=0.5))
    report = await h.tick(await h.open())
    scored = {s["traceId"] for s in v4.scores.values()}
    assert report.skipped["sampled out"] == 40 - len(scored)
    assert 10 <= len(scored) <= 30

    from trace_scorer.worker.traces import sampled

    assert scored == {t for t in ids if sampled(t, 0.5)}


async def test_filters_reach_langfuse_and_the_judge_environment_is_excluded(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "mine", name="weather-agent")
    seed(v4, clock, "theirs", name="billing-agent")
    seed(v4, clock, "judge-call", environment="trace-scorer")
    h = await harness(traces_target(filter={"trace_name": "weather-agent"}))
    await h.tick(await h.open())
    assert {s["traceId"] for s in v4.scores.values()} == {"mine"}
    root_queries = [
        c.request.url.params
        for c in v4.calls_to("GET", "/api/public/v2/observations")
        if c.request.url.params.get("isRootObservation") == "true"
    ]
    assert root_queries and all("trace-scorer" in (q.get("filter") or "") for q in root_queries)


async def test_failed_traces_are_retried_later_without_holding_the_watermark(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "good", "flaky")
    FLAKY.add("flaky")
    h = await harness(traces_target(retry_after="10m", max_tries=3))
    context = await h.open()
    report = await h.tick(context)
    assert report.failed == 1 and report.scored == 1
    assert context.state.watermark("agent") == clock.now() - timedelta(minutes=2)  # not held
    # The scores that did succeed were posted; the failed metric was not.
    assert set(trace_scores(v4, "flaky")) == {"tool_call_accuracy", "rouge", "quality"}
    failure = context.state.failure("agent", "flaky")
    assert failure is not None and failure.tries == 1

    clock.elapsed += 300  # not due yet
    assert (await h.tick(context)).failed == 0
    clock.elapsed += 301  # due: still failing → second try, back-off doubles
    assert (await h.tick(context)).failed == 1
    failure = context.state.failure("agent", "flaky")
    assert failure is not None and failure.tries == 2 and failure.next_try == clock.now() + timedelta(minutes=20)

    FLAKY.clear()  # the judges are back
    clock.elapsed += 1201
    report = await h.tick(context)
    assert report.scored == 1
    assert trace_scores(v4, "flaky")["test_flaky"]["value"] == 1.0
    assert context.state.failure("agent", "flaky") is None


async def test_gives_up_after_max_tries(harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock) -> None:
    seed(v4, clock, "flaky")
    FLAKY.add("flaky")
    h = await harness(traces_target(retry_after="1m", max_tries=2))
    context = await h.open()
    await h.tick(context)
    clock.elapsed += 61
    report = await h.tick(context)
    assert report.gave_up == 1
    failure = context.state.failure("agent", "flaky")
    assert failure is not None and failure.next_try is None
    clock.elapsed += 86400
    assert (await h.tick(context)).failed == 0


async def test_langfuse_down_keeps_the_watermark_and_reposts_as_overwrite(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    from tests.support import langfuse_factories as f
    from trace_scorer.worker.batch import LangfuseUnavailable

    seed(v4, clock, "t1", "t2")
    h = await harness()
    context = await h.open()
    v4.fail_next("POST", "/api/public/scores", *[f.error("down", 503)] * 10)
    try:
        await h.tick(context)
        raise AssertionError("the tick should report Langfuse unavailable")
    except LangfuseUnavailable:
        pass
    assert context.state.watermark("agent") is None
    assert context.state.scored_hashes("agent", ["t1", "t2"]) == {}

    report = await h.tick(context)
    assert report.scored == 2
    assert len(v4.scores) == 8  # one per (trace, name): the retries upserted


async def test_partly_rejected_batch_is_reported_and_not_resent(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    seed(v4, clock, "t1", "t2")
    v4.reject_scores_when(
        lambda body: "value out of range" if body["traceId"] == "t2" and body["name"] == "rouge" else None
    )
    h = await harness()
    context = await h.open()
    report = await h.tick(context)
    assert report.scores_rejected == 1 and report.scores_posted == 7
    assert report.scored == 2  # a rejection is final: both traces are done
    posts = len(v4.score_posts)
    clock.elapsed += 120
    await h.tick(context)
    assert len(v4.score_posts) == posts  # nothing re-sent


async def test_requests_per_100_traces_on_v4(harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock) -> None:
    seed(v4, clock, *[f"t{i:03d}" for i in range(100)])
    h = await harness()
    context = await h.open()
    startup = len(v4.calls)
    report = await h.tick(context)
    assert report.scored == 100
    calls = v4.calls[startup:]
    reads = [c for c in calls if c.method == "GET"]
    posts = [c for c in calls if c.method == "POST"]
    print(f"\nv4: {len(reads)} reads and {len(posts)} score posts for 100 traces ({len(v4.scores)} scores)")
    assert len(reads) <= 5 and len(posts) <= 2


async def test_the_next_batch_is_read_and_scored_while_the_previous_one_finishes(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two batches in flight: the judges' slots do not run dry while a batch waits for its slowest
    trace, posts and the next batch is read."""
    seed(v4, clock, *[f"t{i}" for i in range(6)])
    h = await harness(worker={"batch_size": 2})
    context = await h.open()
    scorer = context.sources["agent"].scorer  # type: ignore[attr-defined]
    original = scorer.run
    active, peak, batches = 0, 0, 0

    async def run(items: Any, tick: Any) -> Any:
        nonlocal active, peak, batches
        active, batches = active + 1, batches + 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.02)
            return await original(items, tick)
        finally:
            active -= 1

    monkeypatch.setattr(scorer, "run", run)
    report = await h.tick(context)
    assert (report.scored, batches, peak) == (6, 3, BATCHES_IN_FLIGHT)
    assert len(v4.scores) == 24
    assert context.state.watermark("agent") == clock.now() - timedelta(minutes=2)


async def test_scores_go_out_in_chunks_of_whole_traces_while_the_batch_is_still_being_scored(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """A batch's scores are posted as results come (a chunk = the whole traces that fit in one score
    request) and each chunk enters the ledger once Langfuse has answered: the last trace of the batch is
    held until a first chunk is posted and recorded, so without chunks this tick could not finish."""
    seed(v4, clock, *[f"t{i}" for i in range(5)])
    held = GATES["t4"] = asyncio.Event()
    h = await harness(worker={"batch_size": 5})
    h.settings = h.settings.model_copy(
        update={"langfuse": h.settings.langfuse.model_copy(update={"score_batch_size": 9})}
    )
    context = await h.open()
    client = context.client
    original = client.post_scores
    posted: list[list[str]] = []
    recorded_before_release: list[str] = []

    async def post_scores(scores: Any) -> Any:
        delivery = await original(scores)
        posted.append(sorted({s.subject.trace_id for s in scores}))
        if not held.is_set():
            # Once recorded (the next step after the answer), the held trace may finish.
            asyncio.get_running_loop().call_soon(release)
        return delivery

    def release() -> None:
        recorded_before_release.extend(context.state.scored_hashes("agent", [f"t{i}" for i in range(4)]))
        held.set()

    client.post_scores = post_scores  # type: ignore[method-assign]
    report = await asyncio.wait_for(h.tick(context), timeout=30)  # a safety net: this fails, never waits

    assert report.scored == 5 and len(v4.scores) == 20
    # 4 scores a trace, at most 9 a request: chunks of two whole traces, the held one last.
    assert [len(p) for p in posted] == [2, 2, 1] and posted[-1] == ["t4"]
    assert sorted(t for p in posted for t in p) == [f"t{i}" for i in range(5)]
    # The first chunk was in the ledger before the held trace was scored.
    assert sorted(recorded_before_release) == posted[0]


async def test_a_batch_that_cannot_be_delivered_starts_no_other_and_lets_the_one_in_flight_finish(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trace_scorer.worker.batch import LangfuseUnavailable

    seed(v4, clock, *[f"t{i}" for i in range(6)])
    h = await harness(worker={"batch_size": 2})
    context = await h.open()
    scorer = context.sources["agent"].scorer  # type: ignore[attr-defined]
    original = scorer.run
    started: list[list[str]] = []

    async def run(items: Any, tick: Any) -> Any:
        items = [item async for item in items]  # the batch's traces, read
        started.append([i.trace_id for i in items])
        if len(started) == 1:
            await asyncio.sleep(0.01)  # the second batch is in flight when the first one fails
            raise LangfuseUnavailable("2 scores undelivered: down")
        await asyncio.sleep(0.05)
        return await original(items, tick)

    monkeypatch.setattr(scorer, "run", run)
    with pytest.raises(LangfuseUnavailable):
        await h.tick(context)
    assert len(started) == 2  # the third batch never started
    # The batch in flight finished: posted and in the ledger; the failed one is not; the watermark waits.
    assert set(context.state.scored_hashes("agent", [t for b in started for t in b])) == set(started[1])
    assert {s["traceId"] for s in v4.scores.values()} == set(started[1])
    assert context.state.watermark("agent") is None

    monkeypatch.setattr(scorer, "run", original)
    report = await h.tick(context)
    assert report.scored == 4 and report.skipped["already scored"] == 2
    assert len(v4.scores) == 24


async def test_metadata_references_are_read_whole(tmp_path: Any, v4: InProcessLangfuse, clock: FakeClock) -> None:
    """Langfuse v4 cuts metadata values at 200 characters unless the read names the key: the worker names
    every root-metadata key its references read, or long golden calls would be cut JSON."""
    from contextlib import AsyncExitStack

    from tests.support.worker import settings_for
    from trace_scorer.ops import Ops
    from trace_scorer.worker.service import open_context, reference_metadata_keys

    seed(v4, clock, "t1")
    settings = settings_for(tmp_path, traces_target())
    assert reference_metadata_keys(settings) == [
        "expected_answer",
        "expected_calls",
        "reference_topics",
        "final_answer_uses_tools",
    ]
    async with AsyncExitStack() as stack:
        context = await open_context(settings, stack, ops=Ops.from_settings(settings.http))  # its own client
        probes = len(v4.calls_to("GET", "/api/public/v2/observations"))  # the generation probe
        await context.sources["agent"].tick(clock.now(), asyncio.Event())
    reads = v4.calls_to("GET", "/api/public/v2/observations")[probes:]
    named = "expected_answer,expected_calls,reference_topics,final_answer_uses_tools"
    assert len(reads) == 2 and all(c.request.url.params["expandMetadata"] == named for c in reads)


async def test_a_long_trace_that_appears_only_when_it_ends_is_still_scored(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """Langfuse v4 shows a root only once it ended (OTel exports spans at their end): a trace that ran
    20 minutes appears after the window holding its start was read. It is scored once, all the same."""
    seed(v4, clock, "t-short", minutes_ago=30)
    h = await harness()
    context = await h.open()
    report = await h.tick(context)
    assert report.scored == 1
    long_start = clock.now() - timedelta(minutes=25)  # already behind the watermark
    assert context.state.watermark("agent") > long_start  # type: ignore[operator]

    clock.elapsed += 20 * 60  # it ran 20 minutes more, ended, and only now shows up
    v4.add_rows(*agent_trace("t-long", long_start, duration=24 * 60))
    clock.elapsed += 6 * 60  # past the quiet period
    report = await h.tick(context)
    assert report.scored == 1 and set(trace_scores(v4, "t-long")) == set(trace_scores(v4, "t-short"))
    posts = len(v4.score_posts)
    clock.elapsed += 60
    report = await h.tick(context)  # read again, posted nothing
    assert report.scored == 0 and len(v4.score_posts) == posts


async def test_when_two_batches_in_flight_both_fail_every_exception_is_retrieved() -> None:
    """Otherwise asyncio logs "Task exception was never retrieved" for the second failed batch."""
    import gc

    from trace_scorer.worker.traces import _first_error

    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:

        async def fail(n: int) -> None:
            raise RuntimeError(f"batch {n} failed")

        tasks = {asyncio.create_task(fail(n)) for n in range(2)}
        done, _ = await asyncio.wait(tasks)
        assert isinstance(_first_error(done), RuntimeError)
        del tasks, done
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))]

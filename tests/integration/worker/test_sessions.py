"""The session source (``scope = "session"``) on the in-process Langfuse v4: which sessions a tick scores,
which it leaves for later (and where that holds the watermark), traces without a session, failures kept
and retried by session."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import FLAKY, MakeHarness, agent_trace, traces_target
from trace_scorer.langfuse import ScoreSubject, score_id


def turn(v4: InProcessLangfuse, clock: FakeClock, trace_id: str, session: str | None, minutes_ago: float) -> None:
    """One turn: an agent trace of 5 s starting ``minutes_ago``, in ``session``."""
    rows = agent_trace(trace_id, clock.now() - timedelta(minutes=minutes_ago))
    for row in rows:
        row["sessionId"] = session
    v4.add_rows(*rows)


def session_target(**overrides: Any) -> dict[str, Any]:
    metrics = [{"metric": "tool_call_count"}, {"metric": "test_flaky"}]
    return traces_target(scope="session", session_quiet="10m", metrics=metrics, kpis=[], **overrides)


def session_scores(v4: InProcessLangfuse, session: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in v4.scores.values() if s.get("sessionId") == session}


async def test_a_quiet_session_is_scored_whole_a_busy_one_waits_and_holds_the_watermark(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    turn(v4, clock, "a1", "chat-a", 50)
    turn(v4, clock, "a2", "chat-a", 40)
    turn(v4, clock, "b1", "chat-b", 45)
    turn(v4, clock, "b2", "chat-b", 6)  # ended 6 minutes ago: chat-b is not quiet for 10 minutes yet
    turn(v4, clock, "lone", None, 30)
    h = await harness(session_target())
    context = await h.open()
    report = await h.tick(context)

    assert (report.seen, report.scored, report.deferred) == (5, 1, 1)
    assert report.skipped["no session"] == 1
    a = session_scores(v4, "chat-a")
    assert {n: s["value"] for n, s in a.items()} == {"tool_call_count": 2.0, "test_flaky": 1.0}
    assert a["tool_call_count"]["id"] == score_id(ScoreSubject.session("chat-a"), "tool_call_count")
    assert not a["tool_call_count"].get("traceId")
    assert session_scores(v4, "chat-b") == {}
    assert not [s for s in v4.scores.values() if s.get("traceId")]  # nothing on a trace
    # chat-b's newest trace is listed again (v4: re-read max_trace_duration behind the watermark).
    watermark = context.state.watermark("agent")
    b2_start = clock.now() - timedelta(minutes=6)
    assert watermark is not None and watermark - timedelta(hours=1) <= b2_start < watermark

    await clock.sleep(300)
    report = await h.tick(context)
    assert report.scored == 1 and report.skipped["no session"] == 0
    assert session_scores(v4, "chat-b")["tool_call_count"]["value"] == 2.0
    assert len(v4.scores) == 4  # two sessions, two scores each


async def test_a_failed_session_is_kept_by_its_id_and_retried_whole(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    turn(v4, clock, "c1", "chat-c", 50)
    turn(v4, clock, "c2", "chat-c", 40)
    FLAKY.add("chat-c")
    h = await harness(session_target(retry_after="1m"))
    context = await h.open()
    report = await h.tick(context)
    assert report.failed == 1
    failure = context.state.failure("agent", "chat-c")
    assert failure is not None and failure.tries == 1
    assert session_scores(v4, "chat-c")["tool_call_count"]["value"] == 2.0  # what succeeded was posted

    FLAKY.discard("chat-c")
    await clock.sleep(120)
    report = await h.tick(context)
    assert report.scored == 1
    assert context.state.failure("agent", "chat-c") is None
    assert session_scores(v4, "chat-c")["test_flaky"]["value"] == 1.0
    assert len(v4.scores) == 2


async def test_metrics_count_sessions_under_their_own_name(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """A session is not a trace: ``sessions_scored_total`` counts it, ``traces_scored_total`` stays empty;
    skips count sessions (not quiet yet) or listed traces (no session), each under its own name."""
    turn(v4, clock, "a1", "chat-a", 50)
    turn(v4, clock, "a2", "chat-a", 40)
    turn(v4, clock, "b1", "chat-b", 6)  # not quiet yet
    turn(v4, clock, "lone", None, 30)
    h = await harness(session_target())
    context = await h.open()
    report = await h.tick(context)
    telemetry = context.ops.telemetry
    report.count_skipped(telemetry)
    value = telemetry.registry.get_sample_value
    agent = {"target": "agent"}
    assert value("trace_scorer_sessions_scored_total", agent) == 1
    assert value("trace_scorer_traces_scored_total", agent) is None
    assert value("trace_scorer_traces_seen_total", agent) == 4
    assert value("trace_scorer_sessions_skipped_total", {**agent, "reason": "not_finished"}) == 1
    assert value("trace_scorer_traces_skipped_total", {**agent, "reason": "not_finished"}) is None
    assert value("trace_scorer_traces_skipped_total", {**agent, "reason": "no_session"}) == 1
    helps = {m.name: m.documentation for m in telemetry.registry.collect()}
    assert helps["trace_scorer_sessions_scored"].startswith("Sessions with at least one score posted")

    await clock.sleep(600)  # chat-b quiet now; chat-a already scored
    report = await h.tick(context)
    report.count_skipped(telemetry)
    assert value("trace_scorer_sessions_scored_total", agent) == 2


async def test_a_session_over_the_row_cap_is_skipped_with_its_reason_and_not_held(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """``[langfuse] max_rows_per_session`` bounds what one session holds, as ``max_rows_per_trace`` bounds a
    trace: over it, the session is skipped (logged, counted, recorded as done), the others scored."""
    from structlog.testing import capture_logs

    from trace_scorer.worker.sessions import SESSION_TOO_LARGE

    for index, minutes in enumerate([50, 45, 40]):
        turn(v4, clock, f"a{index}", "chat-a", minutes)  # 3 turns of 3 rows: 9 rows
    turn(v4, clock, "b0", "chat-b", 35)  # 3 rows
    h = await harness(session_target())
    langfuse = h.settings.langfuse.model_copy(update={"max_rows_per_session": 5})
    h.settings = h.settings.model_copy(update={"langfuse": langfuse})
    context = await h.open()
    with capture_logs() as logs:
        report = await h.tick(context)

    assert report.scored == 1 and report.unit_skipped[SESSION_TOO_LARGE] == 1
    assert session_scores(v4, "chat-a") == {}
    assert session_scores(v4, "chat-b")["tool_call_count"]["value"] == 1.0
    said = [e for e in logs if e["event"] == "session_too_large"]
    assert len(said) == 1 and said[0]["session_id"] == "chat-a" and said[0]["limit"] == 5
    assert said[0]["rows_read"] > 5
    assert context.state.done_reason("agent", "chat-a") == SESSION_TOO_LARGE
    report.count_skipped(context.ops.telemetry)
    value = context.ops.telemetry.registry.get_sample_value
    assert value("trace_scorer_sessions_skipped_total", {"target": "agent", "reason": "session_too_large"}) == 1

    clock.elapsed += 600  # recorded as done: not read nor skipped again
    report = await h.tick(context)
    assert report.scored == 0 and SESSION_TOO_LARGE not in report.unit_skipped
    assert session_scores(v4, "chat-a") == {}

"""scope = "session": the quiet rule, the score subject and its id, how a session score goes on the wire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trace_scorer.langfuse import ScoreSubject, ScoreToPost, TraceRoot
from trace_scorer.langfuse.server.capabilities import ServerCapabilities
from trace_scorer.langfuse.writes.ids import score_id
from trace_scorer.langfuse.writes.score_validation import validate_score
from trace_scorer.langfuse.writes.scores import score_fields
from trace_scorer.worker.sessions import last_activity, session_is_quiet

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
QUIET = 600.0
UNFINISHED = 3600.0


def root(trace_id: str, start_ago: float, end_ago: float | None) -> TraceRoot:
    start = NOW - timedelta(seconds=start_ago)
    end = None if end_ago is None else NOW - timedelta(seconds=end_ago)
    row: dict[str, Any] = {"id": f"o-{trace_id}", "traceId": trace_id, "sessionId": "s"}
    return TraceRoot(trace_id, f"o-{trace_id}", "chat", start, end, "production", None, None, "s", (), {}, row)


def quiet(*roots: TraceRoot) -> bool:
    return session_is_quiet(roots, NOW, quiet=QUIET, unfinished_after=UNFINISHED)


def test_quiet_once_no_trace_started_or_ended_for_session_quiet() -> None:
    assert quiet(root("a", 3000, 2990), root("b", 700, 601))
    assert last_activity([root("a", 3000, 2990), root("b", 700, 601)]) == NOW - timedelta(seconds=601)


def test_a_turn_that_ended_recently_keeps_the_session_open() -> None:
    assert not quiet(root("a", 3000, 2990), root("b", 700, 599))


def test_a_turn_that_started_recently_keeps_it_open_even_listed_out_of_order() -> None:
    assert not quiet(root("b", 30, 20), root("a", 3000, 2990))


def test_a_turn_still_running_keeps_it_open_until_unfinished_after() -> None:
    assert not quiet(root("a", 3000, 2990), root("b", 1200, None))
    assert quiet(root("a", 7300, 7290), root("b", UNFINISHED + 700, None))


# --- the subject and its id --------------------------------------------------------------------------


def test_existing_score_ids_are_unchanged() -> None:
    """Ids of trace, observation and run scores as every earlier release derived them: changing one
    would duplicate every score users already have."""
    assert score_id(ScoreSubject.trace("trace-1"), "latency") == "a1424b94-859d-50e3-8c77-fad780b497b7"
    assert score_id(ScoreSubject.trace("trace-1", "obs-1"), "latency") == "7a33dcef-8394-55c1-b221-43b15fa8d39a"
    assert score_id(ScoreSubject.run("run-1"), "latency") == "97fcb146-1c56-5d09-bf25-421e0996a8f0"


def test_a_session_id_is_its_own_and_the_same_whatever_trace_it_is_posted_on() -> None:
    session = score_id(ScoreSubject.session("chat-1"), "latency")
    assert session == score_id(ScoreSubject.session("chat-1", on_trace="t1"), "latency")
    assert session == score_id(ScoreSubject.session("chat-1", on_trace="t9"), "latency")
    assert session not in {
        score_id(ScoreSubject.trace("chat-1"), "latency"),
        score_id(ScoreSubject.run("chat-1"), "latency"),
        score_id(ScoreSubject.session("chat-2"), "latency"),
        score_id(ScoreSubject.session("chat-1"), "tool_errors"),
    }


def post(subject: ScoreSubject) -> ScoreToPost:
    return ScoreToPost(subject=subject, name="latency", value=1.5, timestamp=NOW)


def test_on_the_wire_a_session_score_names_the_session_or_the_trace_never_both() -> None:
    on_session = score_fields(post(ScoreSubject.session("chat-1")), None)
    assert on_session["sessionId"] == "chat-1" and "traceId" not in on_session
    on_trace = score_fields(post(ScoreSubject.session("chat-1", on_trace="t1")), None)
    assert on_trace["traceId"] == "t1" and "sessionId" not in on_trace
    assert on_session["id"] == on_trace["id"]
    trace = score_fields(post(ScoreSubject.trace("t1")), None)
    assert "sessionId" not in trace


@pytest.mark.parametrize("subject", [ScoreSubject.session("s"), ScoreSubject.session("s", on_trace="t")])
def test_session_scores_pass_validation(subject: ScoreSubject) -> None:
    assert validate_score(post(subject), None) == []


def test_session_scores_by_version() -> None:
    assert not ServerCapabilities.from_version("2.95.12").session_scores
    assert ServerCapabilities.from_version("3.120.0").session_scores
    assert ServerCapabilities.from_version("4.16.0").session_scores
    assert ServerCapabilities.from_version(None).session_scores  # unknown: probed, Cloud is 4.x


def test_on_a_trace_the_comment_names_the_session() -> None:
    from types import SimpleNamespace

    from trace_scorer.metrics.base import Score
    from trace_scorer.worker.scores import scores_to_post

    plan: Any = SimpleNamespace(target=SimpleNamespace(name="chat"), config_hash="h", fingerprints={})
    outcomes = {"latency": Score(2.0, comment="2.0 s")}
    [on_trace] = scores_to_post(plan, outcomes, ScoreSubject.session("chat-1", on_trace="t1"), NOW)
    assert on_trace.comment == "session chat-1: 2.0 s"
    assert on_trace.metadata is not None and on_trace.metadata["session_id"] == "chat-1"
    [on_session] = scores_to_post(plan, outcomes, ScoreSubject.session("chat-1"), NOW)
    assert on_session.comment == "2.0 s"


def test_the_shipped_session_example_is_a_valid_target() -> None:
    import tomllib
    from pathlib import Path

    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.scoring.plan import build_plan

    text = (Path(__file__).resolve().parents[3] / "settings.toml").read_text()
    start = text.index('# [[targets]]\n# name = "sessions"')
    block = []
    for line in text[start:].splitlines():
        if not line.startswith("#"):
            break
        block.append(line.removeprefix("#").removeprefix(" "))
    target = TargetSettings.model_validate(tomllib.loads("\n".join(block))["targets"][0])
    assert target.scope == "session" and target.session_quiet == 900.0
    assert [m.metric for m in build_plan(target).target.metrics] == ["agent_goal_accuracy", "tool_errors"]


def test_a_fleet_refuses_a_session_target_at_start_up_naming_the_key(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trace_scorer import cli

    config = tmp_path / "settings.toml"
    config.write_text(
        "[state]\nurl = 'postgresql://scorer@127.0.0.1:1/nowhere'\n"
        "[[targets]]\nname = 'chats'\nscope = 'session'\n[[targets.metrics]]\nmetric = 'latency'\n"
    )
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-x")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-x")
    assert cli.main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "targets[0].scope" in err and "'chats'" in err


def test_a_sessions_traces_are_asked_by_its_id_in_every_form_the_server_reads() -> None:
    import json

    from trace_scorer.langfuse import TimeWindow, TraceFilter
    from trace_scorer.langfuse.reads.filters import root_matches, v3_traces_query, v4_root_query

    window = TimeWindow(NOW - timedelta(days=1), NOW)
    session = TraceFilter(exclude_environments=("trace-scorer",), session_id="chat-1")
    v4 = v4_root_query(window, session)
    assert v4["session_id"] == "chat-1"
    condition = {"type": "string", "column": "sessionId", "operator": "=", "value": "chat-1"}
    assert condition in json.loads(v4["filter"])  # the filter replaces the simple parameters when present
    v3 = v3_traces_query(window, session)
    assert v3["sessionId"] == "chat-1" and condition in json.loads(str(v3["filter"]))
    assert root_matches(root("a", 60, 50), TraceFilter(session_id="s"))
    assert not root_matches(root("a", 60, 50), TraceFilter(session_id="other"))

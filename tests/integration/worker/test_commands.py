"""`trace-scorer check` and `trace-scorer backfill` through the CLI, against the in-process Langfuse stand-in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, SECRET
from tests.support.langfuse_factories import Reply
from tests.support.langfuse_inprocess import Disconnect, InProcessLangfuse, MakeLangfuse
from tests.support.worker import CLI_SETTINGS, agent_trace
from trace_scorer import cli
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.langfuse.http.retry import CHECK_CONNECT_TIMEOUT

pytestmark = pytest.mark.usefixtures("cli_workdir")


def test_check_prints_server_project_and_score_configs(
    v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    v4.add_score_config(f.score_config("cfg-9", "rouge"))
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "server 4.60.0, API v4 (probed), scores posted via scores-batch" in out and "project standin" in out
    assert "target agent (traces): endpoints answer" in out
    assert "rouge" in out and "cfg-9" in out
    assert "tool_call_accuracy" in out and "missing (created by run)" in out
    assert len(v4.configs) == 1  # check creates nothing


def test_check_reports_the_score_posting_of_an_older_server(
    make_langfuse: MakeLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    make_langfuse("4.16.0")
    assert cli.main(["check"]) == 0
    assert "server 4.16.0, API v4 (probed), scores posted via ingestion" in capsys.readouterr().out


def test_check_fails_naming_a_dataset_the_server_does_not_have(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "settings.toml").write_text(
        CLI_SETTINGS + '[[targets]]\nname = "bench"\nsource = "dataset_runs"\ndatasets = ["nope"]\n'
        '  [[targets.metrics]]\n  metric = "rouge"\n'
    )
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "target bench (dataset_runs): cannot work" in out and "dataset 'nope' not found" in out
    assert "target agent (traces): endpoints answer" in out


def test_check_fails_when_forced_legacy_reads_are_not_served(
    v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """4.x in events_only mode answers the legacy routes 404: a configuration error (exit 2) naming the key."""
    monkeypatch.setenv("TRACE_SCORER_LANGFUSE__API_GENERATION", "v3")
    assert cli.main(["check"]) == 2
    assert "api_generation: 'v3'" in capsys.readouterr().err


def test_wrong_credentials_exit_2_with_a_clear_message(
    v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-lf-not-this-project-0000"
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", wrong)
    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert BASE_URL in err and "LANGFUSE_PUBLIC_KEY" in err and wrong not in err and SECRET not in err
    assert v4.calls and {c.status for c in v4.calls} == {401}


def test_backfill_scores_a_past_window_once(v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]) -> None:
    start = f.T0 + timedelta(hours=1)
    for index in range(5):
        v4.add_rows(*agent_trace(f"old-{index}", start + timedelta(minutes=10 * index)))
    v4.add_rows(*agent_trace("outside", start + timedelta(days=2)))
    args = ["backfill", "--target", "agent", "--from", start.date().isoformat(), "--to", "2026-10-01T12:00"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "5 seen, 5 scored" in out and "10 scores posted" in out
    assert {s["traceId"] for s in v4.scores.values()} == {f"old-{i}" for i in range(5)}
    assert cli.main(args) == 0  # a second backfill of the same window posts nothing
    assert "5 seen, 0 scored" in capsys.readouterr().out
    assert sum(len(p) for p in v4.score_posts) == 10


def test_worker_commands_need_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "settings.toml").write_text(f'[langfuse]\nbase_url = "{BASE_URL}"\n')
    assert cli.main(["run"]) == 2
    assert "no [[targets]] configured" in capsys.readouterr().err


def said(err: str) -> list[str]:
    """What the command printed on stderr, without the log's JSON lines (a retry's warning)."""
    return [line for line in err.splitlines() if line.strip() and not line.startswith("{")]


@pytest.fixture
def check_clock(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """``check``'s client on the test's fake clock: its retry waits are recorded, not slept."""
    monkeypatch.setattr("trace_scorer.langfuse.client.SystemClock", lambda: clock)
    return clock


def test_check_against_an_unreachable_langfuse_fails_in_seconds_naming_the_url(
    v4: InProcessLangfuse, check_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22 item 10: one quick retry, then one line naming the URL and the fix, exit 2 (was: a minute
    of back-off, then a traceback)."""
    v4.fail_next("GET", "/api/public/health", *[Disconnect()] * 10)
    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(said(err)) == 1
    assert f"Langfuse at {BASE_URL} cannot be reached" in err and "LANGFUSE_BASE_URL" in err
    assert len(v4.calls_to("GET", "/api/public/health")) <= 2
    assert sum(check_clock.sleeps) <= 1.0


def test_check_against_a_url_answering_404_says_it_is_not_langfuse(
    v4: InProcessLangfuse, check_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    v4.on("GET", "/api/public/health", Reply(404, {"message": "Not Found"}, unchecked="a web server's 404"))
    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(said(err)) == 1
    assert f"{BASE_URL} is not the address of a Langfuse server" in err and "without /api/public" in err
    assert check_clock.sleeps == []


def test_check_against_a_failing_server_retries_once_and_says_so(
    v4: InProcessLangfuse, check_clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    v4.fail_next("GET", "/api/public/health", *[f.error("down", 503)] * 10)
    assert cli.main(["check"]) == 2
    err = capsys.readouterr().err
    assert f"Langfuse at {BASE_URL} answers but fails" in err and "HTTP 503" in err
    assert len(v4.calls_to("GET", "/api/public/health")) == 2 and sum(check_clock.sleeps) <= 1.0


def test_checks_client_connects_fast_and_the_workers_keeps_its_timeout() -> None:
    settings = LangfuseSettings(public_key="pk-lf-1", secret_key="sk-lf-1", timeout=30)
    assert LangfuseClient.failing_fast(settings)._http.timeout.connect == CHECK_CONNECT_TIMEOUT
    assert LangfuseClient(settings)._http.timeout.connect == 30


def _recent_agent_traces(langfuse: InProcessLangfuse, count: int) -> None:
    now = datetime.now(UTC)
    for index in range(count):
        langfuse.add_rows(*agent_trace(f"recent-{index}", now - timedelta(hours=2, minutes=index)))


def test_check_warns_per_metric_when_no_recent_trace_carries_its_inputs(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Production traces without references: the target reads none (no [targets.references]).
    without_references = CLI_SETTINGS.replace(
        '  [targets.references]\n  expected = ["$.trace.metadata.expected_answer"]\n'
        '  reference_tool_calls = ["$.trace.metadata.expected_calls"]\n',
        "",
    )
    assert without_references != CLI_SETTINGS
    (tmp_path / "settings.toml").write_text(without_references)
    _recent_agent_traces(v4, 3)
    assert cli.main(["check"]) == 0  # a warning is not a failure
    out = capsys.readouterr().out
    assert "target agent: inputs in its 3 most recent traces" in out
    assert "warning: 0 of 3 recent traces carry reference tool calls: tool_call_accuracy would be skipped on all" in out
    assert "warning: 0 of 3 recent traces carry expected answers: rouge would be skipped on all" in out


def test_check_does_not_warn_when_recent_traces_carry_the_inputs(
    v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    _recent_agent_traces(v4, 3)
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "tool_call_accuracy: 3 of 3 recent traces carry its inputs" in out
    assert "rouge: 3 of 3 recent traces carry its inputs" in out
    assert "warning" not in out


def test_check_surveys_an_observation_target_per_observation(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scope = "observation": the survey counts the recent traces' matching observations (each agent
    trace here has one generation and one tool)."""
    settings = CLI_SETTINGS.replace('max_window = "6h"\n', 'max_window = "6h"\nscope = "observation"\n')
    settings = settings.replace('metric = "tool_call_accuracy"', 'metric = "tool_errors"')
    settings = settings.replace('metric = "rouge"', 'metric = "answer_completeness"')
    settings += '[targets.observations]\ntypes = ["TOOL"]\n'
    (tmp_path / "settings.toml").write_text(settings)
    _recent_agent_traces(v4, 3)
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "target agent: inputs in its 3 most recent observations" in out
    assert "tool_errors: 3 of 3 recent observations carry its inputs" in out


def test_check_surveys_a_session_target_per_session(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scope = "session": the survey assembles the recent traces' sessions (all their turns, as the
    worker reads them) and counts sessions; a trace without a session is passed over."""
    settings = CLI_SETTINGS.replace('max_window = "6h"\n', 'max_window = "6h"\nscope = "session"\n')
    settings = settings.replace(
        '  [targets.references]\n  expected = ["$.trace.metadata.expected_answer"]\n'
        '  reference_tool_calls = ["$.trace.metadata.expected_calls"]\n',
        "",
    )
    settings = settings.replace('metric = "tool_call_accuracy"', 'metric = "tool_call_count"')
    (tmp_path / "settings.toml").write_text(settings)
    now = datetime.now(UTC)
    for index, session in enumerate(["chat-1", "chat-1", "chat-2", "chat-2", "chat-2", None]):
        rows = agent_trace(f"turn-{index}", now - timedelta(hours=2, minutes=10 - index))
        for row in rows:
            row["sessionId"] = session
        v4.add_rows(*rows)
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "target agent: inputs in its 2 most recent sessions" in out
    assert "tool_call_count: 2 of 2 recent sessions carry its inputs" in out
    assert "warning: 0 of 2 recent sessions carry expected answers: rouge would be skipped on all" in out
    # Each session was asked for by its id (its turns outside the listing would be read too).
    asked = [c.request.url.params.get("filter", "") for c in v4.calls_to("GET", "/api/public/v2/observations")]
    assert sum("chat-1" in a for a in asked) == 1 and sum("chat-2" in a for a in asked) == 1

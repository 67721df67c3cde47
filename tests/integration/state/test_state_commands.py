"""``trace-scorer state migrate``, ``trace-scorer state import`` and the state line of ``trace-scorer check``,
through the CLI, on the run's PostgreSQL database (a schema per test) and the fake Langfuse."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import langfuse_factories as f
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import CLI_SETTINGS_WITHOUT_STATE, agent_trace
from trace_scorer import cli
from trace_scorer.state import MIGRATIONS, SCHEMA_VERSION, TABLES, StateStore, StoredResult
from trace_scorer.state.postgres import PostgresBackend

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)

@pytest.fixture(autouse=True)
def _workdir(cli_workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A settings file without [state]: the SQLite default (./trace-scorer.db) until a test sets the URL."""
    (cli_workdir / "settings.toml").write_text(CLI_SETTINGS_WITHOUT_STATE)
    for name in ("TRACE_SCORER_STATE__URL", "TRACE_SCORER_STATE__PATH"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def use_postgres(postgres_url: str, postgres_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points the configuration at this test's PostgreSQL schema (as a deployment does, by environment)."""
    monkeypatch.setenv("TRACE_SCORER_STATE__URL", postgres_url)
    monkeypatch.setenv("TRACE_SCORER_STATE__DB_SCHEMA", postgres_schema)


def _postgres(postgres_url: str, postgres_schema: str) -> StateStore:
    return StateStore(PostgresBackend(postgres_url, postgres_schema))


def _sqlite_state(path: Path) -> None:
    """A worker's state with something in every table."""
    store = StateStore(path)
    with store.transaction():
        store.set_watermark("agent", T0)
        store.set_watermark("bench", T0 - timedelta(days=1, microseconds=7))
        store.record_scored("agent", [f"trace-{i:05d}" for i in range(2500)], "hash-a", T0)
        store.record_scored("agent", ["huge"], "hash-a", T0, reason="too many observations")
        store.record_failure("agent", "flaky", "judge down", T0 + timedelta(minutes=5), '{"id": "flaky"}')
        store.record_failure("agent", "flaky", "judge down", T0 + timedelta(minutes=10))
        store.record_failure("agent", "hopeless", "bad data", None)
        store.see_run("bench", "exp-1", 3, T0)
        store.see_run("bench", "exp-1", 4, T0 + timedelta(minutes=2))
        store.set_run_posted("bench", "exp-1", "items4-hashB")
        store.save_results(
            "bench", "exp-1", [StoredResult(f"t{i}", f"item-{i}", '{"rouge": {"value": 0.5}}') for i in range(4)]
        )
    store.close()


def _all_rows(store: StateStore) -> dict[str, list[tuple[object, ...]]]:
    return {t.name: [row for chunk in store.export_rows(t) for row in chunk] for t in TABLES}


# -- state migrate -----------------------------------------------------------------------------------------


def test_migrate_brings_an_sqlite_state_up_and_says_from_which_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = sqlite3.connect(tmp_path / "trace-scorer.db")
    db.executescript(MIGRATIONS[0].sqlite)
    db.execute("PRAGMA user_version = 1")
    db.close()
    assert cli.main(["state", "migrate"]) == 0
    assert (
        capsys.readouterr().out
        == f"state SQLite file {tmp_path / 'trace-scorer.db'}: schema version 1 → {SCHEMA_VERSION}\n"
    )
    assert cli.main(["state", "migrate"]) == 0
    assert f"schema version {SCHEMA_VERSION}, already current" in capsys.readouterr().out


def test_migrate_creates_the_postgres_state_once(
    postgres_url: str, postgres_schema: str, use_postgres: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["state", "migrate"]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"state PostgreSQL {postgres_url} (schema {postgres_schema}): schema version 0 → {SCHEMA_VERSION}\n"
        "job queue: tables created\n"  # distributed mode's queue, beside the state
    )
    assert cli.main(["state", "migrate"]) == 0
    again = capsys.readouterr().out
    assert f"schema version {SCHEMA_VERSION}, already current" in again and "job queue: tables present" in again


def test_migrate_of_an_unreachable_state_exits_2_naming_the_url(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRACE_SCORER_STATE__URL", "postgresql://scorer:pa55-w0rd@127.0.0.1:1/scoring")
    assert cli.main(["state", "migrate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trace-scorer: state error: cannot connect to the PostgreSQL state at [state] url = ")
    assert "postgresql://scorer@127.0.0.1:1/scoring" in err and "pa55-w0rd" not in err


# -- state import ------------------------------------------------------------------------------------------


def test_import_moves_every_row_and_the_worker_goes_on_without_posting_again(
    v4: InProcessLangfuse,
    tmp_path: Path,
    postgres_url: str,
    postgres_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A single worker scored a window into its SQLite state ...
    start = f.T0 + timedelta(hours=1)
    for index in range(5):
        v4.add_rows(*agent_trace(f"old-{index}", start + timedelta(minutes=10 * index)))
    backfill = ["backfill", "--target", "agent", "--from", start.date().isoformat(), "--to", "2026-10-01T12:00"]
    assert cli.main(backfill) == 0
    assert "5 seen, 5 scored" in capsys.readouterr().out
    sqlite_file = tmp_path / "trace-scorer.db"
    store = StateStore(sqlite_file)
    store.set_watermark("agent", T0)  # and what a running worker keeps besides the ledger
    store.record_failure("agent", "flaky", "judge down", T0 + timedelta(minutes=5), '{"id": "flaky"}')
    store.see_run("bench", "exp-1", 4, T0)
    store.save_results("bench", "exp-1", [StoredResult("t1", "item-1", "{}")])
    before = _all_rows(store)
    store.close()

    # ... which moves into PostgreSQL,
    monkeypatch.setenv("TRACE_SCORER_STATE__URL", postgres_url)
    monkeypatch.setenv("TRACE_SCORER_STATE__DB_SCHEMA", postgres_schema)
    assert cli.main(["state", "import", str(sqlite_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"imported SQLite file {sqlite_file} into PostgreSQL {postgres_url} (schema {postgres_schema}) in "
    )
    assert out.endswith(": watermarks 1, ledger 5, failures 1, runs 1, run_results 1 rows\n")
    target = _postgres(postgres_url, postgres_schema)
    assert _all_rows(target) == before
    target.close()

    # and the worker, now on PostgreSQL (the file is gone), finds the window done: not one score posted again.
    for leftover in tmp_path.glob("trace-scorer.db*"):
        leftover.unlink()
    assert cli.main(backfill) == 0
    assert "5 seen, 0 scored" in capsys.readouterr().out
    assert sum(len(p) for p in v4.score_posts) == 10


def test_import_keeps_every_column_of_every_table(
    tmp_path: Path, postgres_url: str, postgres_schema: str, use_postgres: None
) -> None:
    sqlite_file = tmp_path / "old.db"
    _sqlite_state(sqlite_file)
    assert cli.main(["state", "import", str(sqlite_file)]) == 0
    source, target = StateStore(sqlite_file), _postgres(postgres_url, postgres_schema)
    before, after = _all_rows(source), _all_rows(target)
    assert after == before and len(after["ledger"]) == 2501
    # what the worker asks of the state answers the same
    subjects = [f"trace-{i:05d}" for i in range(2500)] + ["huge", "never"]
    assert target.scored_hashes("agent", subjects) == source.scored_hashes("agent", subjects)
    assert target.watermark("bench") == source.watermark("bench") == T0 - timedelta(days=1, microseconds=7)
    assert target.due_failures("agent", T0 + timedelta(hours=1)) == source.due_failures(
        "agent", T0 + timedelta(hours=1)
    )
    assert target.failure("agent", "hopeless") == source.failure("agent", "hopeless")
    assert target.done_reason("agent", "huge") == "too many observations"
    assert target.run("bench", "exp-1") == source.run("bench", "exp-1")
    assert target.run_results("bench", "exp-1") == source.run_results("bench", "exp-1")
    source.close()
    target.close()


def test_import_refuses_a_state_that_holds_rows_unless_forced(
    tmp_path: Path, postgres_url: str, postgres_schema: str, use_postgres: None, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite_file = tmp_path / "old.db"
    _sqlite_state(sqlite_file)
    target = _postgres(postgres_url, postgres_schema)
    target.set_watermark("other", T0)
    target.record_scored("other", ["x"], "h", T0)
    assert cli.main(["state", "import", str(sqlite_file)]) == 2
    err = capsys.readouterr().err
    assert "already holds a state (watermarks 1, ledger 1 rows)" in err and "--force" in err
    assert target.watermark("other") == T0  # left as it was

    assert cli.main(["state", "import", str(sqlite_file), "--force"]) == 0
    assert target.watermark("other") is None and target.scored_hashes("other", ["x"]) == {}
    source = StateStore(sqlite_file)
    assert _all_rows(target) == _all_rows(source)
    source.close()
    target.close()


_HOLD = """
import sys
from trace_scorer.state import StateStore
store = StateStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


def test_import_refuses_a_state_a_worker_is_still_writing(
    tmp_path: Path, use_postgres: None, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite_file = tmp_path / "old.db"
    _sqlite_state(sqlite_file)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(sqlite_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        assert cli.main(["state", "import", str(sqlite_file)]) == 2
        assert f"is in use by another trace-scorer process (pid {holder.pid}" in capsys.readouterr().err
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def test_import_needs_a_postgres_state_and_an_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _sqlite_state(tmp_path / "old.db")
    assert cli.main(["state", "import", "old.db"]) == 2
    assert "set [state] url (or TRACE_SCORER_STATE__URL)" in capsys.readouterr().err
    monkeypatch.setenv("TRACE_SCORER_STATE__URL", "postgresql://scorer@127.0.0.1:1/scoring")
    assert cli.main(["state", "import", "missing.db"]) == 2
    assert "missing.db: no such file" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()


# -- check -------------------------------------------------------------------------------------------------


def test_check_reports_the_postgres_state_and_changes_nothing(
    v4: InProcessLangfuse,
    postgres_url: str,
    postgres_schema: str,
    use_postgres: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["check"]) == 0
    state_line = f"State PostgreSQL {postgres_url} (schema {postgres_schema}): "
    out = capsys.readouterr().out
    assert (
        f"{state_line}empty: the tables are created at the first start (schema version {SCHEMA_VERSION}), writable"
        in out
    )
    assert cli.main(["check"]) == 0  # still empty: the check created nothing
    assert "empty: the tables are created at the first start" in capsys.readouterr().out

    assert cli.main(["state", "migrate"]) == 0
    capsys.readouterr()
    assert cli.main(["check"]) == 0
    assert f"{state_line}schema version {SCHEMA_VERSION} (current), writable" in capsys.readouterr().out


def test_check_fails_when_the_state_cannot_be_reached(
    v4: InProcessLangfuse, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRACE_SCORER_STATE__URL", "postgresql://scorer:pa55-w0rd@127.0.0.1:1/scoring")
    assert cli.main(["check"]) == 1
    out = capsys.readouterr().out
    assert "State PostgreSQL postgresql://scorer@127.0.0.1:1/scoring (schema trace_scorer): cannot be used: " in out
    assert "Connection refused" in out and "pa55-w0rd" not in out
    assert "target agent (traces): endpoints answer" in out  # the rest is still checked


def test_check_reports_a_new_sqlite_state(
    v4: InProcessLangfuse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert f"State SQLite file {tmp_path / 'trace-scorer.db'}: not created yet: a new state" in out
    assert not (tmp_path / "trace-scorer.db").exists()

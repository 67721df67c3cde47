"""The SQLite state file — one process at a time, damaged / unwritable / foreign files refused, schema versions —
and the ``[state]`` settings. What the store remembers, on both backends: tests/integration/state/."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trace_scorer.config import load_settings
from trace_scorer.config.common import ConfigError
from trace_scorer.config.state import StateSettings
from trace_scorer.errors import UserError
from trace_scorer.state import MIGRATIONS, SCHEMA_VERSION, StateError, StateStore, check_state
from trace_scorer.state import sqlite as sqlite_backend

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


# -- opening: one process at a time, damaged / unwritable / foreign files refused, schema versions ----------

_HOLD = """
import sys
from trace_scorer.state import StateStore
store = StateStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()  # until the parent closes our stdin (or kills us)
store.close()
"""


def _hold_in_another_process(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


@pytest.mark.parametrize("how", ["exits", "kill -9"])
def test_a_second_process_on_the_same_state_is_refused_until_the_first_is_gone(tmp_path: Path, how: str) -> None:
    path = tmp_path / "state.db"
    holder = _hold_in_another_process(path)
    try:
        with pytest.raises(StateError) as refused:
            StateStore(path)
        message = str(refused.value)
        assert str(path) in message and f"pid {holder.pid}" in message and "in use" in message
        assert isinstance(refused.value, UserError)
    finally:
        if how == "kill -9":
            holder.send_signal(signal.SIGKILL)
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()
    assert holder.returncode == (-signal.SIGKILL if how == "kill -9" else 0)
    store = StateStore(path)  # the lock went with the process
    store.close()


def test_the_same_file_cannot_be_opened_twice_in_one_process_either(tmp_path: Path) -> None:
    first = StateStore(tmp_path / "s.db")
    with pytest.raises(StateError, match=f"pid {os.getpid()}"):
        StateStore(tmp_path / "s.db")
    first.close()
    first.close()  # harmless
    StateStore(tmp_path / "s.db").close()


def _real_state(path: Path) -> None:
    store = StateStore(path)
    store.set_watermark("agent", T0)
    store.record_scored("agent", [f"trace-{i:05d}" for i in range(3000)], "hash-a", T0)
    store.close()


def test_a_truncated_state_file_is_refused_with_the_path_and_the_fix(tmp_path: Path) -> None:
    good = tmp_path / "good.db"
    _real_state(good)
    data = good.read_bytes()
    assert len(data) > 8 * 4096
    for cut in (len(data) // 2, 4096 * 3 + 100, 50):
        broken = tmp_path / f"cut-{cut}.db"
        broken.write_bytes(data[:cut])
        with pytest.raises(StateError, match="Restore it from a backup") as refused:
            StateStore(broken)
        assert str(broken) in str(refused.value)
        StateStore(good).close()  # the lock of the refused open was released; the good copy still opens


def test_random_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(random.Random(7).randbytes(20_000))
    with pytest.raises(StateError, match="not a readable trace-scorer state") as refused:
        StateStore(path)
    assert str(path) in str(refused.value) and "backup" in str(refused.value)


def test_an_empty_file_is_refused_but_a_missing_one_is_a_new_state(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.touch()
    with pytest.raises(StateError, match="empty \\(0 bytes\\)") as refused:
        StateStore(path)
    assert "delete the file" in str(refused.value) and str(path) in str(refused.value)
    assert path.stat().st_size == 0  # left as it was
    path.unlink()
    store = StateStore(path)
    assert store.watermark("agent") is None and store.schema_version == SCHEMA_VERSION
    store.close()


def test_a_sqlite_file_that_is_not_a_state_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(StateError, match="not a trace-scorer state"):
        StateStore(path)


def test_a_state_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _real_state(path)
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StateError, match=f"schema version {SCHEMA_VERSION + 1}, newer") as refused:
        StateStore(path)
    assert str(path) in str(refused.value)


def test_a_state_from_before_versioning_is_migrated_and_keeps_its_ledger(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0].sqlite)  # the version-1 schema, as releases before versioning wrote it
    db.execute("INSERT INTO ledger VALUES ('agent', 't1', 'hash-a', ?)", (T0.isoformat(),))
    db.execute("INSERT INTO watermarks VALUES ('agent', ?)", (T0.isoformat(),))
    db.commit()
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    db.close()
    store = StateStore(path)
    assert store.schema_version == SCHEMA_VERSION
    assert store.scored_hashes("agent", ["t1"]) == {"t1": "hash-a"} and store.watermark("agent") == T0
    assert store.done_reason("agent", "t1") is None
    store.record_scored("agent", ["big"], "hash-a", T0, reason="too many observations")
    assert store.done_reason("agent", "big") == "too many observations"
    store.record_scored("agent", ["big"], "hash-b", T0)
    assert store.done_reason("agent", "big") is None
    store.close()


def test_a_full_disk_at_start_up_is_reported_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connect = sqlite_backend._connect

    def tiny_disk(path: str) -> sqlite3.Connection:
        db = connect(path)
        db.execute("PRAGMA max_page_count = 2")  # SQLite's own "disk full" (SQLITE_FULL) after two pages
        return db

    monkeypatch.setattr(sqlite_backend, "_connect", tiny_disk)
    path = tmp_path / "s.db"
    with pytest.raises(StateError, match="the disk is full") as refused:
        StateStore(path)
    assert str(path) in str(refused.value)


def _open_as_unprivileged(path: Path) -> str:
    """The error of opening ``path``, as a user file modes apply to (root's writes ignore them)."""
    if os.geteuid() != 0:
        try:
            StateStore(path).close()
        except StateError as exc:
            return str(exc)
        return "opened"
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read)
        try:
            os.setuid(65534)  # nobody
            StateStore(path).close()
            result = "opened"
        except StateError as exc:
            result = str(exc)
        except BaseException as exc:
            result = f"unexpected {type(exc).__name__}: {exc}"
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        result = pipe.read().decode()
    os.waitpid(child, 0)
    return result


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is private to the user running the tests)."""
    path = Path(tempfile.mkdtemp(prefix="state-modes-"))
    path.chmod(0o755)
    yield path
    for inner in [path, *path.rglob("*")]:
        inner.chmod(0o777)
    shutil.rmtree(path)


@pytest.mark.parametrize("read_only", ["file", "directory", "both"])
def test_a_read_only_state_is_refused_with_the_path_and_the_fix(shared_dir: Path, read_only: str) -> None:
    folder = shared_dir / "state"
    path = folder / "s.db"
    _real_state(path)
    for f in [folder, *folder.iterdir()]:
        f.chmod(0o777 if f.is_dir() else 0o666)  # writable by anyone: only the modes set below keep it out
    if read_only in ("file", "both"):
        for f in folder.iterdir():
            f.chmod(0o444)
    if read_only in ("directory", "both"):
        folder.chmod(0o555)
    message = _open_as_unprivileged(path)
    assert message.startswith("cannot write the state file"), message
    assert str(path) in message and "permissions" in message


def test_a_state_directory_that_cannot_be_created_is_refused(shared_dir: Path) -> None:
    shared_dir.chmod(0o555)
    message = _open_as_unprivileged(shared_dir / "sub" / "s.db")
    assert message.startswith("cannot write the state file") and "Permission denied" in message, message


def test_check_leaves_an_older_state_as_it_was_and_says_it_will_be_migrated(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0].sqlite)
    db.execute("PRAGMA user_version = 1")
    db.close()
    check = check_state(StateSettings(path=str(path)))
    assert check.ok and check.description == f"SQLite file {path}"
    assert check.detail == (
        f"schema version 1: migrated to {SCHEMA_VERSION} at the next start (or by trace-scorer state migrate), writable"
    )
    db = sqlite3.connect(path)  # the migration was tried and rolled back: still version 1, no reason column
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "reason" not in [r[1] for r in db.execute("PRAGMA table_info(ledger)")]
    db.close()


def test_check_of_a_missing_state_creates_nothing(tmp_path: Path) -> None:
    check = check_state(StateSettings(path=str(tmp_path / "new.db")))
    assert check.ok and "not created yet" in check.detail
    assert list(tmp_path.iterdir()) == []


def test_check_of_a_state_held_by_the_running_worker_says_so_without_failing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    holder = StateStore(path)
    check = check_state(StateSettings(path=str(path)))
    holder.close()
    assert check.ok and check.detail.startswith("in use: ") and f"pid {os.getpid()}" in check.detail


def test_check_of_a_damaged_state_fails_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(random.Random(3).randbytes(9000))
    check = check_state(StateSettings(path=str(path)))
    assert not check.ok and "not a readable trace-scorer state" in check.detail


# -- [state] settings -------------------------------------------------------------------------------------


def _load(tmp_path: Path, toml: str, **environ: str) -> StateSettings:
    path = tmp_path / "settings.toml"
    path.write_text(toml)
    return load_settings(path, environ).state


def test_the_url_comes_from_the_file_or_the_environment_and_is_never_shown(tmp_path: Path) -> None:
    state = _load(tmp_path, '[state]\nurl = "postgresql://scorer@db:5432/scoring"\n')
    assert state.postgres_url == "postgresql://scorer@db:5432/scoring" and state.db_schema == "trace_scorer"
    secret = "postgresql://scorer:pa55word@db:5432/scoring"
    state = _load(tmp_path, "", TRACE_SCORER_STATE__URL=secret, TRACE_SCORER_STATE__DB_SCHEMA="staging")
    assert state.postgres_url == secret and state.db_schema == "staging"
    assert "pa55word" not in repr(state) and "pa55word" not in str(state.model_dump())


@pytest.mark.parametrize(
    ("toml", "environ", "message"),
    [
        (
            '[state]\npath = "s.db"\nurl = "postgresql://db/scoring"\n',
            {},
            "state: state.path and state.url are exclusive",
        ),
        ('[state]\npath = "s.db"\n', {"TRACE_SCORER_STATE__URL": "postgresql://db/x"}, "state.path and state.url"),
        ('[state]\ndb_schema = "staging"\n', {}, "state: state.db_schema is only used with state.url"),
        ('[state]\nurl = "mysql://db/scoring"\n', {}, "state.url: expected a PostgreSQL URL"),
        ('[state]\nurl = "postgresql://db/x"\ndb_schema = "Staging-1"\n', {}, "state.db_schema: 'Staging-1' is not"),
    ],
)
def test_invalid_state_settings_fail_naming_the_key(
    tmp_path: Path, toml: str, environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, toml, **environ)


def test_a_password_in_the_settings_file_is_refused_and_not_repeated(tmp_path: Path) -> None:
    for url in ("postgresql://scorer:pa55word@db/scoring", "postgresql://scorer@db/scoring?password=pa55word"):
        with pytest.raises(ConfigError, match=r"state\.url: carries a password") as refused:
            _load(tmp_path, f'[state]\nurl = "{url}"\n')
        assert "pa55word" not in str(refused.value) and "PGPASSWORD" in str(refused.value)


def test_a_malformed_url_is_refused_without_repeating_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"state\.url: not a valid PostgreSQL URL") as refused:
        _load(tmp_path, "", TRACE_SCORER_STATE__URL="postgresql://scorer:pa55word@db/scoring?nonsense=1")
    assert "pa55word" not in str(refused.value)

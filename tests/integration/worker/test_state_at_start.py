"""`trace-scorer run` on a state it cannot use (issue #13): exit 2 with the path and the fix, before any
request to Langfuse — a second worker on the same state, or a damaged state file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.worker.test_commands import CONFIG
from tests.support.langfuse_client import PUBLIC, SECRET
from tests.support.langfuse_fake import FakeLangfuse
from trace_scorer import cli

HOLD = """
import sys
from trace_scorer.state import StateStore
store = StateStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def _workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(CONFIG)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    for name in ("LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)


def test_a_second_run_on_the_same_state_exits_2_naming_the_state_and_the_pid(
    tmp_path: Path, fake: FakeLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "state.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        assert cli.main(["run"]) == 2
        err = capsys.readouterr().err
        assert "state error:" in err and "state.db is in use by another trace-scorer process" in err
        assert f"pid {holder.pid}" in err
        assert fake.calls == []  # refused before any request to Langfuse
    finally:
        holder.kill()
        holder.wait()


def test_a_damaged_state_exits_2_with_the_path_and_the_fix(
    tmp_path: Path, fake: FakeLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "state.db").write_bytes(b"not a database, just text" * 400)
    assert cli.main(["run"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'state.db'}" in err and "Restore it from a backup" in err
    assert "Traceback" not in err
    assert fake.calls == []

"""`trace-scorer run` on a state it cannot use (issue #13): exit 2 with the path and the fix, before any
request to Langfuse — a second worker on the same state, or a damaged state file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer import cli

HOLD = """
import sys
from trace_scorer.state import StateStore
store = StateStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


pytestmark = pytest.mark.usefixtures("cli_workdir")


def test_a_second_run_on_the_same_state_exits_2_naming_the_state_and_the_pid(
    tmp_path: Path, v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]
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
        assert v4.calls == []  # refused before any request to Langfuse
    finally:
        holder.kill()
        holder.wait()


def test_a_damaged_state_exits_2_with_the_path_and_the_fix(
    tmp_path: Path, v4: InProcessLangfuse, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "state.db").write_bytes(b"not a database, just text" * 400)
    assert cli.main(["run"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'state.db'}" in err and "Restore it from a backup" in err
    assert "Traceback" not in err
    assert v4.calls == []

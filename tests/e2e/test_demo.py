"""The README's worker demo, run as a newcomer runs it: the command the README gives, from the repository
root, with only the quick-start install's packages (the dev extras' modules made unimportable)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: Modules of the ``dev`` extra (and ``report``) that ``pip install -e .`` does not bring.
DEV_ONLY = (
    "pytest",
    "respx",
    "hypothesis",
    "jsonschema",
    "rouge_score",
    "yaml",
    "kubernetes_validate",
    "check_jsonschema",
    "promql_parser",
    "matplotlib",
    "jinja2",
    "selenium",
)


def readme_demo_command() -> list[str]:
    """The demo's command line in the README (``.venv/bin/python -m standins.demo``), run with this
    interpreter instead of the README's ``.venv``."""
    found = re.findall(r"^(\.venv/bin/python -m standins\.demo[^\n]*)$", (ROOT / "README.md").read_text(), re.M)
    assert found, "the README gives no `.venv/bin/python -m standins.demo` command"
    argv = shlex.split(found[0])
    return [sys.executable, *argv[1:]]


@pytest.mark.slow
def test_readme_demo_scores_traces_and_runs_reads_them_back_and_stops_by_itself(tmp_path: Path) -> None:
    blocked = tmp_path / "no-dev-extras"
    blocked.mkdir()
    for module in DEV_ONLY:
        (blocked / f"{module}.py").write_text(f"raise ImportError('{module}: a dev extra, not in the quick start')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE_SCORER_", "LANGFUSE_"))}
    env["PYTHONPATH"] = str(blocked)
    # The demo bounds itself (--timeout, default 300 s); this bound only keeps a hang from holding the suite.
    done = subprocess.run(readme_demo_command(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    # Scores read back through the public API: every metric, on traces and on the experiment runs.
    assert re.search(r"Read back through GET http://127\.0\.0\.1:\d+/api/public/v3/scores: \d+ scores", out), out
    for name, level in [("polite", "trace"), ("tool_call_accuracy", "trace"), ("rouge", "trace"),
                        ("tool_call_accuracy", "run"), ("rouge", "run")]:  # fmt: skip
        assert re.search(rf"^  {name} +{level} +[1-9]\d* scores, mean ", out, re.M), (name, level, out)
    every = r"Langfuse holds scores for +(\d+)/\1 production traces, +(\d+)/\2 experiment traces, (\d+)/\3 runs"
    assert re.search(every, out), out
    # The worker seen from outside: its ticks, its probes, its metrics; stopped by SIGTERM, exit 0.
    assert re.search(r"worker  tick production +scored +[1-9]\d* traces", out), out
    assert re.search(r"/readyz → 200\n  \{\"status\": \"ok\"", out), out
    assert re.search(r"^  trace_scorer_scores_posted_total\{target=\"production\"\} [1-9]", out, re.M), out
    assert "worker exited with 0" in out, out
    assert re.search(r"Done in [\d.]+ s: \d+ scores stored, 0 duplicates", out), out

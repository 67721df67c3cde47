"""Start-up (issue 23 item 4): each command imports what it uses. ``--help`` and ``score`` of a tool-call
target load neither nltk (rouge's optional stemmer, ~1 s of CPU through scipy.stats), numpy/scipy
(compare's statistics), openai (the judges), langfuse's SDK, procrastinate nor the worker. Which modules
a process imported is not a timing: bench/bench_startup.py measures the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
#: Never imported by --help or by score of a tool-call target.
HEAVY = ("nltk", "scipy", "numpy", "openai", "langfuse", "procrastinate", "apscheduler", "trace_scorer.worker")


def imported_by(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``main(args)`` in a fresh interpreter; the heavy modules it left in sys.modules."""
    code = (
        "import sys, json\n"
        "from trace_scorer.cli import main\n"
        "try:\n"
        f"    code = main({args!r})\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith({HEAVY!r}))\n"
        "print('IMPORTED ' + json.dumps(heavy), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
    [line] = [line for line in done.stderr.splitlines() if line.startswith("IMPORTED ")]
    return done, json.loads(line.removeprefix("IMPORTED "))


@pytest.mark.parametrize("args", [["--help"], ["score", "--help"], ["backfill", "--help"]])
def test_help_imports_no_heavy_module(args: list[str], tmp_path: Path) -> None:
    done, heavy = imported_by(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "score" in done.stdout
    assert heavy == []


def test_compare_help_still_lists_its_options(tmp_path: Path) -> None:
    """compare's arguments are added only for a compare command line: its help still shows them."""
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "compare", "--help"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "--baseline" in done.stdout and "--html" in done.stdout


def test_version_is_the_installed_one(tmp_path: Path) -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "trace_scorer", "--version"], capture_output=True, text=True)
    assert done.stdout.strip() == f"trace-scorer {version('trace-scorer')}"


def test_score_of_the_shipped_samples_imports_no_heavy_module() -> None:
    """The quick start's command: rouge (stemmer off) and the tool metrics, no nltk, no judge."""
    done, heavy = imported_by(["score", "examples/samples", "--json"], ROOT)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) >= 8
    # numpy stays: the pipeline's embedding types use it (answer_similarity); it is not the cost here.
    assert [m for m in heavy if m.split(".")[0] != "numpy"] == []


def test_the_porter_stemmer_still_loads_nltk_when_asked_for() -> None:
    from trace_scorer.metrics._tokens import tokenize

    assert tokenize("players jumped", "porter") == ["player", "jump"]
    assert "nltk" in sys.modules

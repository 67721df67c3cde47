"""The repository stands alone: a clone in an empty folder passes the stand-ins' contract tests, reading
nothing outside itself but the interpreter's own packages; and no file of it names a path beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: What a file of the repository may not name: the folder that held the design documents beside the
#: clone, and those documents (built from parts, so this file does not name them itself).
FORBIDDEN = ("../" + "shared", "/work/" + "shared", "shared/" + "reference", "SPEC" + ".md", "ARCHITECTURE" + ".md")
#: Folders that are not the repository's files: tools' caches, the virtual environment, build output.
NOT_OURS = {".git", ".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__", "build", "dist"}

#: A slice of the suite that exercises the stand-ins' contract (requests and answers, both generations).
SLICE = (
    "tests/integration/langfuse/test_contract.py",
    "tests/integration/standins/test_versions.py",
    "tests/integration/standins/test_generate.py",
)

#: A pytest plugin for the clone's run: an audit hook notes every file opened outside the clone and the
#: interpreter's own folders (sys.prefix: the virtual environment's packages; the standard library), and
#: the list is written out when the session ends.
GUARD = '''
import json, os, sys

CLONE = os.path.realpath(os.environ["STANDALONE_CLONE"])
OUTSIDE = os.path.realpath(os.environ["STANDALONE_WATCHED"])
ALLOWED = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
seen = set()


def _hook(event, args):
    if event != "open" or not isinstance(args[0], (str, bytes)):
        return
    path = os.path.realpath(os.fsdecode(args[0]))
    if path.startswith(OUTSIDE + os.sep) and not path.startswith(CLONE + os.sep):
        if not any(path.startswith(a + os.sep) for a in ALLOWED):
            seen.add(path)


sys.addaudithook(_hook)


def pytest_sessionfinish(session, exitstatus):
    found = sorted(seen)  # before the report is opened: writing it is not the run reading outside
    with open(os.environ["STANDALONE_REPORT"], "w") as out:
        json.dump(found, out)
'''


def _files() -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_OURS and not d.endswith(".egg-info")]
        out += [Path(folder) / name for name in names]
    return out


def test_no_file_of_the_repository_names_a_path_outside_it() -> None:
    offenders = []
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (images, wheels) cite nothing
        offenders += [f"{path.relative_to(ROOT)}: {word}" for word in FORBIDDEN if word in text]
    assert offenders == []


@pytest.mark.slow
def test_a_clone_in_an_empty_folder_passes_the_contract_tests(tmp_path: Path) -> None:
    git = shutil.which("git")
    assert git, "git is needed to clone the repository"
    head = subprocess.run([git, "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    empty = tmp_path / "empty"  # the clone's folder: nothing beside the clone
    clone = empty / "trace-scorer"
    subprocess.run([git, "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run([git, "-C", str(clone), "checkout", "-q", head.stdout.strip()], check=True)
    assert sorted(p.name for p in empty.iterdir()) == ["trace-scorer"]

    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "standalone_guard.py").write_text(GUARD)
    report = tmp_path / "opened-outside.json"
    scratch = clone / ".tmp"
    scratch.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        # The clone first: its trace_scorer, standins and tests win over the installed (editable) ones.
        "PYTHONPATH": os.pathsep.join([str(clone), str(guard)]),
        "STANDALONE_CLONE": str(clone),
        # Watched: the folder holding this checkout, so both it and anything beside it;
        # the checkout alone when it sits at the file system's root.
        "STANDALONE_WATCHED": str(ROOT if ROOT.parent == ROOT.parent.parent else ROOT.parent),
        "STANDALONE_REPORT": str(report),
        # Temporary files inside the clone: a checkout under the system's temporary folder (a CI clone in
        # /tmp) would otherwise watch that folder, and with it every temporary file the run makes.
        "TMPDIR": str(scratch),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "standalone_guard", "-p", "no:cacheprovider", *SLICE]
    run = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "error" not in run.stdout.splitlines()[-1]
    # The clone's own code ran, not this checkout's.
    assert json.loads(report.read_text()) == []

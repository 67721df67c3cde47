"""Start-up cost of the ``trace-scorer`` command: user+sys CPU of whole processes (issue #23, item 4).

Each command runs ``--runs`` times as a fresh process (``python -m trace_scorer …``); the median CPU
(user + sys, the process and its children, from ``os.wait4``) is printed per command. CPU, not wall
time: on a shared, busy machine the wall clock measures the neighbours. Compare two checkouts by
running this file with each one's interpreter, e.g. before and after a change:

    .venv/bin/python bench/bench_startup.py --runs 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "score examples/samples": ["score", "examples/samples"],
    "score examples/samples --json": ["score", "examples/samples", "--json"],
    "compare --help": ["compare", "--help"],
}


def cpu_seconds(argv: list[str]) -> float:
    """User+sys CPU of one whole process running ``argv`` (its children included)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per command (median reported)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run (default: this one)")
    args = parser.parse_args()
    print(f"python: {args.python}; {args.runs} runs each; median user+sys CPU of the whole process")
    cpu_seconds([args.python, "-m", "trace_scorer", "--help"])  # warm the bytecode cache and the page cache
    for name, command in COMMANDS.items():
        times = [cpu_seconds([args.python, "-m", "trace_scorer", *command]) for _ in range(args.runs)]
        print(f"{name:32s} median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f})")


if __name__ == "__main__":
    main()

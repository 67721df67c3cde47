"""Benchmark: issue #25 — how much of trace_scorer a newcomer walks through, and how the house is laid out.

Two walks, each in a fresh process of its own, counted with ``sys.setprofile`` (and ``threading.setprofile``
for work handed to threads): the distinct files of ``trace_scorer/`` and the distinct functions in them
that ran. A function is a code object with its own locals (``def``, methods, coroutines, generators);
module and class bodies (imports) are left out, lambdas and comprehensions counted apart.

- **tick**: one production tick of the worker (``Worker.tick``, as ``trace-scorer run`` ticks) on the
  Langfuse stand-in (v4, its own process) with 3 ended traces and a deterministic target
  (``tool_call_accuracy``, ``rouge``), after start-up (``open_context``: settings, plans, connection,
  score configs). Logging configured as the worker's (INFO, JSON lines, to a scratch file).
- **score**: one offline ``trace-scorer score FILE`` (the ``trace-scorer`` console script's function) of
  a small example file, with the CLI module imported first; no settings file (run in an empty folder).

Then, from the source alone: the import graph's layers (the packages and root modules of trace_scorer in
dependency order, as ``tests/unit/core/test_import_graph.py`` builds the graph: each layer imports only
layers before it) and the loose modules at the package root (``__init__`` and ``__main__`` aside).

The worker's functions are found by what they define (``open_context``, ``Worker``, ``load_settings``,
``configure_logging``, ``Ops``), the CLI by its console-script entry point, so the bench keeps working
when modules move.

    PYTHONPATH=. python bench/bench_walk.py [--file examples/samples/agents.jsonl] [--list]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import graphlib
import importlib
import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import trace_scorer  # noqa: E402

PACKAGE = Path(trace_scorer.__file__).resolve().parent
DEFAULT_FILE = REPO / "examples" / "samples" / "agents.jsonl"
TRACES = 3
#: A function's code object: its own locals (CPython's CO_NEWLOCALS); module and class bodies have none.
NEWLOCALS = inspect.CO_NEWLOCALS


class Walk:
    """The code of trace_scorer entered while :meth:`counting` is open."""

    def __init__(self) -> None:
        self.codes: set[Any] = set()

    def _hook(self, frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(str(PACKAGE)):
            self.codes.add(frame.f_code)

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    def figures(self) -> dict[str, Any]:
        functions = [c for c in self.codes if c.co_flags & NEWLOCALS]
        named = [c for c in functions if not c.co_name.startswith("<")]
        files = {c.co_filename for c in functions}
        return {
            "files": len(files),
            "functions": len(named),
            "lambdas_and_comprehensions": len(functions) - len(named),
            "per_file": {
                os.path.relpath(f, PACKAGE.parent): sorted(c.co_qualname for c in named if c.co_filename == f)
                for f in sorted(files)
            },
        }


def defining(*names: str) -> ModuleType:
    """The module of trace_scorer that defines every one of ``names`` at its top level (found in the source,
    so the bench does not name module paths)."""
    wanted = set(names)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {
            node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        if wanted <= defined:
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            return importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    raise LookupError(f"no module of trace_scorer defines {', '.join(names)}")


def console_script() -> Callable[[list[str]], int]:
    """The function behind the ``trace-scorer`` command (pyproject's entry point)."""
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="trace-scorer")
    main: Callable[[list[str]], int] = script.load()
    return main


def walk_tick() -> dict[str, Any]:
    from bench.bench_worker import scenario_for
    from standins.generate import Scenario
    from standins.handles import start_langfuse
    from standins.langfuse_server import LangfuseOptions
    from standins.worker import PRODUCTION_REFERENCES, backlog_timing, production_target, worker_environment

    service = defining("open_context", "Worker")
    settings_module = defining("load_settings")
    logs = defining("configure_logging")
    ops_module = defining("Ops")
    scenario: Scenario = scenario_for(TRACES)
    workdir = Path(tempfile.mkdtemp(prefix="bench-walk-"))
    with start_langfuse(LangfuseOptions(generation="v4", scenario=scenario), mode="process") as lf:
        target = production_target(
            ["tool_call_accuracy", "rouge"], references=PRODUCTION_REFERENCES, **backlog_timing(scenario)
        )
        env = worker_environment(lf, targets=[target], state_path=workdir / "state.db", inherit=False)
        env["TRACE_SCORER_HTTP"] = json.dumps({"enabled": False})
        settings = settings_module.load_settings(None, environ=env)
        walk = Walk()

        async def tick() -> None:
            async with contextlib.AsyncExitStack() as stack:
                ops = ops_module.Ops.from_settings(settings.http)
                context = await service.open_context(settings, stack, ops=ops)
                worker = service.Worker(context)
                (source,) = context.sources.values()
                with walk.counting():
                    await worker.tick(source)

        with open(workdir / "worker.log", "w") as log, contextlib.redirect_stderr(log):
            logs.configure_logging(settings.log.level, settings.log.format)
            asyncio.run(tick())
        scored = {score["traceId"] for score in lf.scores()}
        if len(scored) != TRACES:
            raise RuntimeError(f"the tick scored {len(scored)} of {TRACES} traces: {workdir / 'worker.log'}")
    return walk.figures()


def walk_score(file: Path) -> dict[str, Any]:
    main = console_script()
    walk = Walk()
    with tempfile.TemporaryDirectory(prefix="bench-walk-") as empty:
        os.chdir(empty)  # no ./settings.toml: the metrics chosen without configuration
        with (
            open(os.devnull, "w") as sink,
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            walk.counting(),
        ):
            code = main(["score", str(file.resolve())])
    if code != 0:
        raise RuntimeError(f"trace-scorer score {file} exited {code}")
    return walk.figures()


def layers() -> list[list[str]]:
    """The parts of trace_scorer in dependency order: each layer imports only the layers before it."""
    from tests.unit.core.test_import_graph import part_graph  # the graph the import-graph test checks

    sorter = graphlib.TopologicalSorter(part_graph())
    sorter.prepare()
    found = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        found.append([f"{name}/" if (PACKAGE / name).is_dir() else name for name in ready])
        sorter.done(*ready)
    return found


def loose_modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))


def in_own_process(*args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=False, cwd=REPO
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench_walk {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the file `score` reads")
    parser.add_argument("--list", action="store_true", help="also list the functions entered, file by file")
    parser.add_argument("--walk", choices=("tick", "score"), help=argparse.SUPPRESS)  # one walk, this process
    args = parser.parse_args(argv)
    if args.walk:
        figures = walk_tick() if args.walk == "tick" else walk_score(args.file)
        print(json.dumps(figures))
        return 0
    walks = {
        f"one production tick (v4 stand-in, {TRACES} traces)": in_own_process("--walk", "tick"),
        f"one offline score of {os.path.relpath(args.file.resolve(), REPO)}": in_own_process(
            "--walk", "score", "--file", str(args.file)
        ),
    }
    for label, figures in walks.items():
        print(
            f"{label}: {figures['files']} files, {figures['functions']} functions entered "
            f"(+{figures['lambdas_and_comprehensions']} lambdas and comprehensions)"
        )
        if args.list:
            for file, names in figures["per_file"].items():
                print(f"  {file} ({len(names)}): {', '.join(names)}")
    found = layers()
    print(f"import graph: {sum(map(len, found))} parts in {len(found)} layers (each imports only those above)")
    for number, layer in enumerate(found, 1):
        print(f"  {number}. {' '.join(layer)}")
    loose = loose_modules()
    print(f"loose modules at the package root: {len(loose)} ({', '.join(loose)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

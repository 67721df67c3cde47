"""The packages of trace_scorer import each other without a cycle (issue #12, "One clear house").

Every module is parsed with ``ast``: its imports at module level and inside functions (the deferred ones
that keep openai, langfuse and torch off the start-up path) both count. Each import is an edge between
top-level parts of trace_scorer (a subpackage such as ``judge`` or a module such as ``sample``); edges
within one part are left out. The graph must sort topologically.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import trace_scorer

ROOT = Path(trace_scorer.__file__).parent
PACKAGE = "trace_scorer"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    return (ROOT / f"{name}.py").is_file() or (ROOT / name / "__init__.py").is_file()


def _part(module: str) -> str | None:
    """The top-level part of trace_scorer a module belongs to (None: outside trace_scorer, or the root)."""
    pieces = module.split(".")
    if pieces[0] != PACKAGE or len(pieces) < 2:
        return None
    return pieces[1]


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module named by an import anywhere in ``tree`` (relative imports resolved)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            if target == PACKAGE:  # ``from trace_scorer import retry`` names a module (``__version__`` does not)
                found.update(f"{target}.{alias.name}" for alias in node.names if _is_module(alias.name))
    return found


def part_graph() -> dict[str, set[str]]:
    """Each top-level part of trace_scorer → the parts it imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        source = _part(module)
        if source is None:
            continue
        graph.setdefault(source, set())
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for target in _imported(tree, module, path.name == "__init__.py"):
            part = _part(target)
            if part is not None and part != source:
                graph[source].add(part)
    return graph


def test_the_parts_of_trace_scorer_import_each_other_without_a_cycle() -> None:
    graph = part_graph()
    assert {"judge", "metrics", "embeddings", "providers", "langfuse"} <= set(graph)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle = " → ".join(exc.args[1])
        raise AssertionError(f"import cycle between parts of trace_scorer: {cycle}") from None


def test_the_judge_knows_nothing_of_the_metrics() -> None:
    """The judged-metric glue lives in trace_scorer.metrics; the judge sits below the metrics."""
    assert "metrics" not in part_graph()["judge"]


def test_the_providers_sit_below_the_judge_and_the_embeddings() -> None:
    graph = part_graph()
    assert "judge" not in graph["embeddings"]
    assert not graph["providers"] & {"judge", "embeddings", "metrics"}


def _imports_of(module: str) -> set[str]:
    path = ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")
    return _imported(ast.parse(path.read_text(encoding="utf-8")), module, is_package=False)


def test_the_pipeline_knows_metrics_not_the_judge() -> None:
    """The judge's per-sample deadline lives in the judged-metric layer (metrics/_judged.py), issue #25."""
    assert "trace_scorer.judge.judge" not in _imports_of("trace_scorer.scoring.pipeline")


def test_the_outcomes_are_imported_from_outcomes_py() -> None:
    """metrics/base.py re-exports them for plug-ins; trace_scorer's own modules name their home."""
    outcomes = {"Score", "Skipped", "Failed", "Outcome"}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "trace_scorer.metrics.base",
                "trace_scorer.metrics",
            ):
                found += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name in outcomes]
    assert found == []

"""The metric registry imports a built-in metric's module when it is asked for (issue 15): a target that
uses tool_call_accuracy never loads nltk (rouge's stemmer) or the judge's modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import trace_scorer.metrics as builtin_package
from trace_scorer.metrics.base import Metric
from trace_scorer.metrics.registry import MetricRegistry, RegistryError, default_registry


def test_every_built_in_metric_lives_in_the_module_named_after_its_key() -> None:
    """The convention ``get(key)`` relies on to import one module only."""
    for cls in default_registry().classes():
        if cls.__module__.startswith(f"{builtin_package.__name__}."):
            assert cls.__module__ == f"{builtin_package.__name__}.{cls.key}", cls


def test_get_imports_only_the_module_of_the_key() -> None:
    code = (
        "import sys, json\n"
        "from trace_scorer.metrics.registry import default_registry\n"
        "cls = default_registry().get('tool_call_accuracy')\n"
        "print(json.dumps([cls.__name__, sorted(m for m in sys.modules if m.startswith(('nltk', 'sacrebleu',"
        " 'trace_scorer.metrics.', 'trace_scorer.judge')))]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    name, loaded = json.loads(done.stdout)
    assert name == "ToolCallAccuracy"
    assert not [m for m in loaded if m.startswith(("nltk", "sacrebleu", "trace_scorer.judge"))]
    assert "trace_scorer.metrics.rouge" not in loaded and "trace_scorer.metrics.tool_call_accuracy" in loaded


def test_score_with_a_tool_call_target_imports_no_text_or_judge_metric(tmp_path: Path) -> None:
    (tmp_path / "settings.toml").write_text(
        '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "tool_call_accuracy"\n'
    )
    sample = {"id": "a", "tool_calls": [{"name": "f", "arguments": {"x": 1}}], "reference_tool_calls": [{"name": "f"}]}
    (tmp_path / "s.jsonl").write_text(json.dumps(sample) + "\n")
    code = (
        "import sys, json\n"
        "from trace_scorer.cli import main\n"
        "code = main(['score', 's.jsonl', '--json'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('nltk', 'trace_scorer.metrics.')))),"
        " file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scores"] == {"tool_call_accuracy": 0.0}
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert not [m for m in loaded if m.startswith("nltk")]
    assert "trace_scorer.metrics.rouge" not in loaded and "trace_scorer.metrics.bleu" not in loaded


def test_unknown_keys_and_listing_import_everything() -> None:
    registry = MetricRegistry([], modules={"tool_call_accuracy": "trace_scorer.metrics.tool_call_accuracy"})
    assert registry.get("nope") is None
    assert registry.keys() == ["tool_call_accuracy"]
    full = default_registry()
    assert {"rouge", "bleu", "tool_call_accuracy", "pass_at_k"} <= set(full.keys())


class _Impostor(Metric):  # type: ignore[type-arg]
    key = "tool_call_accuracy"


def test_a_third_party_metric_with_a_built_in_key_is_refused_when_the_built_in_loads() -> None:
    registry = MetricRegistry([_Impostor], modules={"tool_call_accuracy": "trace_scorer.metrics.tool_call_accuracy"})
    with pytest.raises(RegistryError, match=r"'tool_call_accuracy' is defined twice: trace_scorer\.metrics\."):
        registry.get("tool_call_accuracy")

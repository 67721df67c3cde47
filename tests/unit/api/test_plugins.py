"""Trace formats and KPI formulas from entry points, as metrics are: a package installed beside
trace-scorer (a real ``*.dist-info`` with ``entry_points.txt``, found by importlib.metadata) adds a
format that extraction reads and a formula that a target uses; a broken or wrong one stops at start-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint, EntryPoints
from pathlib import Path
from typing import Any

import pytest

from trace_scorer.extract.formats import FORMATS, installed_formats
from trace_scorer.kpi.formulas import FORMULAS, installed_formulas
from trace_scorer.runtime import plugins
from trace_scorer.runtime.plugins import PluginError

PLUGIN = '''
from collections.abc import Mapping
from typing import Any, ClassVar

from trace_scorer.extract.formats.base import Format
from trace_scorer.kpi.base import FormulaOptions, KpiFormula


class Chatbot(Format):
    """A house format: "person" and "bot" roles."""

    name: ClassVar[str] = "chatbot"
    roles: ClassVar[Mapping[str, Any]] = {"person": "user", "bot": "assistant"}


CHATBOT = Chatbot()


class HalfOptions(FormulaOptions):
    metric: str


class Half(KpiFormula[HalfOptions]):
    key: ClassVar[str] = "half"
    Options: ClassVar[type[FormulaOptions]] = HalfOptions

    def inputs(self) -> tuple[str, ...]:
        return (self.options.metric,)

    def compute(self, values: Mapping[str, float]) -> float:
        return values[self.options.metric] / 2

    def describe(self) -> str:
        return f"{self.options.metric} / 2"
'''

SCRIPT = '''
import json, sys
from trace_scorer.api.scoring import score

rows = json.loads(sys.argv[1])
samples = [{"id": "s", "messages": [{"role": "user", "content": "hi"}], "response": "hello there",
            "expected": "hello there"}]
result = score(samples, ["bleu"], kpis=[{"name": "half_bleu", "formula": "half", "metric": "bleu"}])
sample = score(rows, ["bleu"]).samples[0].sample
print(json.dumps({"kpi": result.values()[0].get("half_bleu"),
                  "messages": [m.role for m in sample.messages or []], "response": sample.response}))
'''

ROW: dict[str, Any] = {
    "id": "obs-1",
    "traceId": "trace-1",
    "type": "GENERATION",
    "name": "chat",
    "startTime": "2026-03-02T09:15:09.620Z",
    "endTime": "2026-03-02T09:15:11.000Z",
    "parentObservationId": None,
    "isRootObservation": True,
    "input": {"messages": [{"role": "person", "content": "What is the capital of France?"}]},
    "output": {"role": "bot", "content": "Paris."},
    "metadata": {},
}


def install(site: Path) -> None:
    """A package ``house_plugin`` with its distribution's metadata, as pip would leave it."""
    (site / "house_plugin.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "house_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: house-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[trace_scorer.formats]\nchatbot = house_plugin:CHATBOT\n\n"
        "[trace_scorer.kpi_formulas]\nhalf = house_plugin:Half\n"
    )


def run_with(site: Path | None) -> dict[str, Any]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps([ROW])], env=env, capture_output=True, text=True, check=False
    )
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}


def test_an_installed_format_and_formula_are_used(tmp_path: Path) -> None:
    install(tmp_path)
    done = run_with(tmp_path)
    assert done["rc"] == 0, done["err"]
    got = json.loads(done["out"])
    assert got["kpi"] == pytest.approx(0.5)
    assert got["messages"] == ["user", "assistant"]
    assert got["response"] == "Paris."


def test_without_the_plugin_the_formula_is_unknown() -> None:
    done = run_with(None)
    assert done["rc"] == 1
    assert "half" in done["err"]


def fake(monkeypatch: pytest.MonkeyPatch, group: str, value: str) -> None:
    """``entry_points(group=...)`` answering one entry point of ``group`` (importlib.metadata's own type)."""
    wanted = group
    found = EntryPoints([EntryPoint(name="fake", value=value, group=group)])
    monkeypatch.setattr(plugins, "entry_points", lambda group: found if group == wanted else EntryPoints([]))


def test_a_format_entry_point_is_added_after_the_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    fake(monkeypatch, plugins.FORMATS_GROUP, "trace_scorer.extract.formats.openai:OPENAI")
    formats = installed_formats.__wrapped__()  # not the process's cached list
    assert formats[: len(FORMATS)] == FORMATS and len(formats) == len(FORMATS) + 1


def test_a_formula_entry_point_is_registered_by_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    fake(monkeypatch, plugins.KPI_FORMULAS_GROUP, "tests.unit.api.test_plugins:Third")
    formulas = installed_formulas.__wrapped__()  # not the process's cached table
    assert list(formulas)[: len(FORMULAS)] == list(FORMULAS) and formulas["third"] is Third


def test_a_formula_reusing_a_builtin_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake(monkeypatch, plugins.KPI_FORMULAS_GROUP, "tests.unit.api.test_plugins:Average")
    with pytest.raises(PluginError, match="KPI formula 'average' is defined twice"):
        installed_formulas.__wrapped__()


@pytest.mark.parametrize(
    ("group", "value", "message"),
    [
        (plugins.FORMATS_GROUP, "json:dumps", "is not an instance of a Format subclass"),
        (plugins.KPI_FORMULAS_GROUP, "json:dumps", "is not a KpiFormula class with a key"),
        (plugins.FORMATS_GROUP, "no_such_module:X", "failed to load: No module named 'no_such_module'"),
    ],
)
def test_a_wrong_entry_point_names_itself(
    monkeypatch: pytest.MonkeyPatch, group: str, value: str, message: str
) -> None:
    fake(monkeypatch, group, value)
    load = installed_formats.__wrapped__ if group == plugins.FORMATS_GROUP else installed_formulas.__wrapped__
    with pytest.raises(PluginError, match=f"entry point 'fake' \\({value}\\).*{message}"):
        load()


# Formulas for the entry points above (importable by their module path).
from trace_scorer.kpi.formulas import AverageFormula as _Average  # noqa: E402


class Third(_Average):
    key = "third"


class Average(_Average):
    key = "average"


@pytest.mark.parametrize(
    ("entry_points", "named"),
    [
        ("[trace_scorer.formats]\nbroken = json:dumps\n", "'broken' (json:dumps) of trace_scorer.formats"),
        ("[trace_scorer.kpi_formulas]\nbroken = json:dumps\n", "'broken' (json:dumps) of trace_scorer.kpi_formulas"),
    ],
)
def test_a_broken_plugin_stops_score_at_start_up(tmp_path: Path, entry_points: str, named: str) -> None:
    """Exit 2 naming the entry point, before anything is read (not a traceback, not a note on every
    trace's extraction)."""
    info = tmp_path / "broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "score", "examples/traces/openai_chat.jsonl"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""

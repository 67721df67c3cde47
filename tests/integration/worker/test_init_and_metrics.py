"""``trace-scorer metrics`` lists every registered metric; ``trace-scorer init`` writes a commented
settings file — from recent traces when Langfuse credentials are set (issue 23 item 7)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.langfuse_client import BASE_URL
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import agent_trace
from trace_scorer import cli
from trace_scorer.config import load_settings
from trace_scorer.metrics.base import Metric, MetricOptions
from trace_scorer.metrics.registry import default_registry


class _PluginOptions(MetricOptions):
    cutoff: float = 0.5
    label: str


class _Plugin(Metric[_PluginOptions]):
    """A plug-in's metric."""

    key = "plugin_metric"
    Options = _PluginOptions
    requires = ("response",)


def test_metrics_json_lists_built_ins_and_plug_ins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = default_registry().with_classes(_Plugin)
    monkeypatch.setattr("trace_scorer.metrics.registry.default_registry", lambda: registry)
    assert cli.main(["metrics", "--json"]) == 0
    listed = {m["key"]: m for m in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(registry.keys()) == set(listed)
    assert listed["tool_call_accuracy"]["requires"] == ["tool_calls", "reference_tool_calls"]
    assert listed["agent_goal_accuracy"]["needs"] == ["judge"]
    assert listed["pass_at_k"]["per_group"] is True
    rouge = {o["name"]: o for o in listed["rouge"]["options"]}
    assert rouge["stemmer"]["default"] == "none" and "porter" in rouge["stemmer"]["type"]
    plugin = listed["plugin_metric"]
    assert plugin["module"] == __name__ and plugin["description"] == "A plug-in's metric."
    assert plugin["options"] == [
        {"name": "cutoff", "type": "float", "default": 0.5, "required": False},
        {"name": "label", "type": "str", "default": None, "required": True},
    ]


def test_metrics_table_names_inputs_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["metrics"]) == 0
    out = capsys.readouterr().out
    assert "tool_call_accuracy" in out and "inputs: tool_calls, reference_tool_calls" in out
    assert "needs a judge model ([[providers]])" in out and "argument_match_threshold" in out


@pytest.fixture
def empty_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_init_without_credentials_writes_a_template_that_loads(
    empty_workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["init"]) == 0
    text = (empty_workdir / "settings.toml").read_text()
    assert '# metric = "tool_call_accuracy"' in text and "inputs: tool_calls, reference_tool_calls" in text
    assert load_settings(empty_workdir / "settings.toml").targets == []
    assert "no Langfuse credentials" in capsys.readouterr().err


def test_init_never_overwrites_without_force(empty_workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (empty_workdir / "settings.toml").write_text("# mine\n")
    assert cli.main(["init"]) == cli.EXIT_CONFIG
    assert "settings.toml exists: not overwritten (--force replaces it)" in capsys.readouterr().err
    assert (empty_workdir / "settings.toml").read_text() == "# mine\n"
    assert cli.main(["init", "--force"]) == 0
    assert "trace-scorer init" in (empty_workdir / "settings.toml").read_text()


def test_init_with_credentials_proposes_metrics_from_recent_traces(
    v4: InProcessLangfuse, cli_workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    os.remove(cli_workdir / "settings.toml")
    monkeypatch.setenv("LANGFUSE_BASE_URL", BASE_URL)
    now = datetime.now(UTC)
    for index in range(3):
        v4.add_rows(*agent_trace(f"t{index}", now - timedelta(hours=2, minutes=index)))
    v4.add_rows(*agent_trace("too-old", now - timedelta(days=3)))
    assert cli.main(["init", "--hours", "24"]) == 0
    assert "read 3 recent traces" in capsys.readouterr().err
    text = (cli_workdir / "settings.toml").read_text()
    assert "#   messages               3 of 3" in text and "#   tool_calls             3 of 3" in text
    assert "#   reference_tool_calls   0 of 3" in text
    # The judged metrics have their inputs (messages) and wait for a provider; the reference-based
    # ones are not proposed: no trace has a reference.
    assert '  # metric = "agent_goal_accuracy"    # needs a judge' in text
    assert "Not proposed (their inputs are in none of these traces): " in text
    assert "tool_call_accuracy" in text.split("Not proposed")[1]
    settings = load_settings(cli_workdir / "settings.toml")
    assert settings.langfuse.base_url == BASE_URL

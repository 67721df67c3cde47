"""``trace-scorer score`` with ``llm_judge`` on the shipped samples against the OpenAI stand-in: the labels of
BOOLEAN and CATEGORICAL scores in ``--json`` and in the table, the reasoning as the comment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.standins import StartOpenAI
from trace_scorer import cli

SAMPLES = ROOT / "examples" / "samples"


def write_config(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "settings.toml"
    config.write_text(
        f"""
[log]
level = "WARNING"
[[providers]]
name = "local"
base_url = "{url}/v1"
chat_models = ["judge-a", "judge-b"]
[[targets]]
name = "judged"
  [[targets.metrics]]
  metric = "llm_judge"
  name = "polite"
  prompt = "Is this answer polite? {{{{answer}}}}"
  variables = {{ answer = "$.sample.response" }}
  output = {{ data_type = "BOOLEAN" }}
  [[targets.metrics]]
  metric = "llm_judge"
  name = "tone"
  prompt = "Which tone does the agent take in this conversation? {{{{conversation}}}}"
  output = {{ data_type = "CATEGORICAL", categories = ["warm", "neutral", "curt"] }}
"""
    )
    return config


def test_labels_in_json_and_table(start_llm: StartOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm = start_llm()
    config = write_config(tmp_path, llm.url)
    assert cli.main(["score", str(SAMPLES), "--config", str(config), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 8
    judged = [line for line in lines if "labels" in line]
    assert judged, "no sample was judged"
    for line in judged:
        labels = line["labels"]
        assert labels.get("polite", "true") in ("true", "false")
        assert labels.get("tone", "warm") in ("warm", "neutral", "curt")
        if "tone" in labels:
            assert line["scores"]["tone"] == ["warm", "neutral", "curt"].index(labels["tone"])
            assert set(line["judges"]["tone"]["models"]) == {"local/judge-a", "local/judge-b"}
    assert cli.main(["score", str(SAMPLES), "--config", str(config)]) == 0
    table = capsys.readouterr().out
    assert any(word in table for word in ("warm", "neutral", "curt"))

"""``trace-scorer score`` on a judged target against the OpenAI stand-in (llama.cpp's profile): ``--json``
carries each judged score's reasoning, votes, per-model verdicts, tokens and cost; the table's footer
gives the judges' totals per model."""

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
max_concurrency = 1
[providers.prices]
"judge-a" = {{ input = 1.0, output = 2.0 }}
[judge]
retry_initial_wait = "0.05s"
retry_max_wait = "0.1s"
[[targets]]
name = "judged"
  [[targets.metrics]]
  metric = "aspect_critic"
  name = "polite"
  definition = "The answer is polite"
  strictness = 3
"""
    )
    return config


def test_score_json_carries_what_each_judge_said(
    start_llm: StartOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm = start_llm()
    config = write_config(tmp_path, llm.url)
    assert cli.main(["score", str(SAMPLES), "--config", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert len(lines) == 8
    for line in lines:
        details = line["judges"]["polite"]
        assert set(details["models"]) == {"local/judge-a", "local/judge-b"}
        for model, said in details["models"].items():
            assert said["verdict"] in ("pass", "fail") and said["reasoning"]
            assert len(said["votes"]) == 3 and said["tokens"]["prompt"] > 0
            assert ("cost_usd" in said) == (model == "local/judge-a")  # priced: only judge-a
    # the totals per model, on stderr beside the JSON lines
    assert "local/judge-a: " in captured.err and "cost unknown (no price)" in captured.err


def test_the_table_footer_gives_the_judges_totals_per_model(
    start_llm: StartOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llm = start_llm()
    config = write_config(tmp_path, llm.url)
    assert cli.main(["score", str(SAMPLES), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    footer = out[out.index("Judges") :]
    calls = llm.stats()["by_model"]
    for model in ("judge-a", "judge-b"):
        line = next(x for x in footer.splitlines() if f"local/{model}:" in x)
        assert line.split(": ", 1)[1].startswith(f"{calls[model]} calls")

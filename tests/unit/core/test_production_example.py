"""``trace-scorer score examples/production`` with the shipped settings: the reference-free checks score
the production traces offline (no references in them), each fault visible; the report prints facts as
numbers, not as [0, 1] scores."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import ROOT
from trace_scorer import cli

EXAMPLE = ROOT / "examples" / "production"


def test_shipped_settings_score_the_production_example(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["score", str(EXAMPLE), "--config", str(ROOT / "settings.toml"), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    samples = [line for line in map(json.loads, out.splitlines()) if "id" in line]
    assert len(samples) == 10
    scored = {name for s in samples for name in s["scores"]}
    assert {"tool_call_validity", "tool_errors", "tool_loops", "answer_completeness", "latency",
            "total_tokens", "total_cost", "tool_call_count"} <= scored  # fmt: skip
    assert not scored & {"tool_call_accuracy", "rouge", "bleu"}  # no references in production traces
    values = {name: [s["scores"].get(name) for s in samples] for name in scored}
    assert 1.0 in values["tool_loops"]  # the repeated call
    assert any(v is not None and v < 1 for v in values["tool_call_validity"])  # the wrong argument type
    assert any(v is not None and v > 0 for v in values["tool_errors"])  # the failed tool
    assert 0.0 in values["answer_completeness"]  # the answer cut off
    assert all(v is not None and v > 1 for v in values["latency"])


def test_the_table_shows_facts_as_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["score", str(EXAMPLE), "--config", str(ROOT / "settings.toml")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert "496 " in out and "496.000" not in out  # total_tokens of the first trace
    assert "0.0001401" in out  # its cost, not 0.000

"""``trace-scorer score`` on exported observation rows with a target of scope "observation": one sample
per matching observation, as the worker builds them; the trace scope on the same rows stays per trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.extract.test_observation_samples import openai_wrapper_trace
from trace_scorer import cli

SETTINGS = """
[[targets]]
name = "gens"
scope = "{scope}"
  [targets.observations]
  types = ["GENERATION"]
  [[targets.metrics]]
  metric = "tool_call_validity"
  [[targets.metrics]]
  metric = "answer_completeness"
"""


@pytest.mark.parametrize(("scope", "ids"), [("observation", ["g1", "g2"]), ("trace", ["t1"])])
def test_exported_rows_are_scored_per_observation_or_per_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, scope: str, ids: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(SETTINGS.format(scope=scope))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in openai_wrapper_trace()) + "\n")
    code = cli.main(["score", str(rows), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == ids
    if scope == "observation":
        first, last = lines
        assert first["scores"] == {"tool_call_validity": 1.0, "answer_completeness": 0.0}  # asked for a call
        assert last["scores"] == {"answer_completeness": 1.0}
        assert "tool_call_validity" in last["skipped"]

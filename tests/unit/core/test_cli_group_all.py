"""``group_by = "*"``: every sample of the input is one group (pass@k over a whole file of attempts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_scorer import cli
from trace_scorer.offline.groups import group_key as _group_key
from trace_scorer.sample import Sample

CONFIG = """
[log]
level = "WARNING"
[[targets]]
name = "attempts"
group_by = "*"
  [[targets.metrics]]
  metric = "tool_call_accuracy"
  [[targets.metrics]]
  metric = "pass_at_k"
  k = [1, 2, 3]
  correct_when = "tool_call_accuracy"
  threshold = 1.0
"""


def attempt(item: str, run: str, right: bool) -> str:
    reference = [{"name": "get_weather", "arguments": {"city": item}}]
    made = reference if right else [{"name": "get_weather", "arguments": {"city": "Nowhere"}}]
    return json.dumps(
        {"id": f"{item}-{run}", "item_id": item, "run_id": run, "tool_calls": made, "reference_tool_calls": reference}
    )


def test_group_key_star_puts_every_sample_in_one_group() -> None:
    assert _group_key(Sample(id="a"), "*") == _group_key(Sample(id="b", run_id="r", item_id="q"), "*") == "all"
    assert _group_key(Sample(id="a"), "run_id") is None  # a field: samples without it are in no group


def test_score_computes_pass_at_k_over_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "settings.toml").write_text(CONFIG)
    outcomes = {"Tokyo": [True, True, False], "Paris": [False, False, False], "Oslo": [True, True]}
    lines = [attempt(item, f"run-{i}", ok) for item, oks in outcomes.items() for i, ok in enumerate(oks)]
    (tmp_path / "attempts.jsonl").write_text("\n".join(lines) + "\n")

    assert cli.main(["score", "attempts.jsonl", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    groups = [r for r in records if "group" in r]
    assert len(groups) == 1 and groups[0]["group"] == "all" and groups[0]["size"] == 8
    scores = groups[0]["scores"]
    assert scores["pass_at_1"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert scores["pass_at_2"] == pytest.approx((1 + 0 + 1) / 3)  # Tokyo: 1 − C(1, 2)/C(3, 2) = 1
    assert scores["pass_hat_2"] == pytest.approx((1 / 3 + 0 + 1) / 3)  # Tokyo: C(2, 2)/C(3, 2)
    assert scores["pass_at_3"] == pytest.approx(0.5)  # Oslo (2 attempts) is left out for k = 3
    assert groups[0]["scores"]["tool_call_accuracy"] == pytest.approx(4 / 8)

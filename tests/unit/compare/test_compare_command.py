"""``trace-scorer compare`` on the shipped example: the candidate is better on tool_call_accuracy, worse on
rouge, unchanged on tool_selection — and the table, the JSON and the HTML report say exactly that."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trace_scorer.cli import main

EXAMPLE = Path(__file__).parents[3] / "examples" / "compare"
BASE_ARGS = ["compare", str(EXAMPLE), "--config", str(EXAMPLE / "settings.toml"), "--baseline", "baseline"]
EXPECTED = {"tool_call_accuracy": "better", "rouge": "worse", "tool_selection": "no detectable difference"}


@pytest.fixture(scope="module")
def example_json() -> dict[str, object]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*BASE_ARGS, "--json"]) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def test_the_example_json_says_better_worse_and_unchanged(example_json: dict[str, object]) -> None:
    [comparison] = example_json["comparisons"]  # type: ignore[index]
    assert comparison["baseline"] == {"name": "baseline", "id": "baseline", "items": 20, "samples": 60}
    assert comparison["candidate"]["samples"] == 60
    metrics = {m["name"]: m for m in comparison["metrics"]}
    assert {name: m["verdict"] for name, m in metrics.items()} == EXPECTED
    for m in metrics.values():
        assert m["paired"] == 20
        low, high = m["interval"]
        assert low <= m["difference"] <= high
        assert m["difference"] == pytest.approx(m["candidate"]["mean"] - m["baseline"]["mean"])
    assert metrics["rouge"]["regressed"] == 20 and len(metrics["rouge"]["worst_items"]) == 10
    assert metrics["tool_call_accuracy"]["worst_items"] == []
    assert comparison["only_in_baseline"] == [] and comparison["only_in_candidate"] == []
    # pass@k from the target's pass_at_k metric: k = 1…3 (three attempts per item) for both runs.
    curves = {c["run"]: c for c in comparison["pass_curves"]}
    assert set(curves) == {"baseline", "candidate"}
    assert [p["k"] for p in curves["candidate"]["points"]] == [1, 2, 3]
    assert curves["baseline"]["criterion"] == "tool_call_accuracy >= 1"
    # pass@1 is the share of correct attempts: the mean tool_call_accuracy of 0/1 values.
    assert curves["candidate"]["points"][0]["pass_at_k"] == pytest.approx(
        metrics["tool_call_accuracy"]["candidate"]["mean"]
    )
    assert comparison["options"]["n_resamples"] == 9999 and comparison["options"]["seed"] == 0


def test_the_same_inputs_give_the_same_numbers(
    example_json: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*BASE_ARGS, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == example_json


def test_the_table_shows_each_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE_ARGS, "--candidate", "candidate"]) == 0
    out = capsys.readouterr().out
    for name, verdict in EXPECTED.items():
        assert re.search(rf"{name}\s.*{verdict}", out), f"{name}: {verdict} not in\n{out}"
    assert "most regressed on rouge" in out and "pass@k / pass^k" in out


def test_fail_on_regression_exits_3_naming_the_score(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE_ARGS, "--json", "--fail-on-regression"]) == 3
    assert "significantly worse: rouge (candidate)" in capsys.readouterr().err


def test_only_the_named_scores_are_compared(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE_ARGS, "--json", "--metric", "tool_selection", "--fail-on-regression"]) == 0
    [comparison] = json.loads(capsys.readouterr().out)["comparisons"]
    assert [m["name"] for m in comparison["metrics"]] == ["tool_selection"]


def test_the_html_report_has_every_plot_inline(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert main([*BASE_ARGS, "--json", "--html", str(report)]) == 0
    text = report.read_text(encoding="utf-8")
    rows = dict(re.findall(r'data-metric="([^"]+)" data-verdict="([^"]+)"', text))
    assert rows == EXPECTED
    plots = re.findall(r'<figure class="plot" data-plot="([a-z]+)">\s*<svg', text)
    # differences; per score a distribution and the paired differences; regressions where items got worse
    # (rouge, tool_selection); pass@k.
    assert sorted(plots) == sorted(
        ["differences", *["distribution", "paired"] * 3, "regressions", "regressions", "pass"]
    )
    assert "<script" not in text and not re.search(r'(src|href)="https?://', text)


def test_usage_errors_exit_2_with_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ["--config", str(EXAMPLE / "settings.toml")]
    assert main(["compare", str(EXAMPLE), *config]) == 2
    assert "--baseline RUN (runs: baseline, candidate)" in capsys.readouterr().err
    assert main([*BASE_ARGS, "--candidate", "nightly"]) == 2
    assert "no run matches 'nightly'" in capsys.readouterr().err
    assert main([*BASE_ARGS, "--dataset", "bench"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["compare", str(EXAMPLE / "baseline.jsonl"), *config, "--baseline", "baseline"]) == 2
    assert "at least two runs" in capsys.readouterr().err
    assert main([*BASE_ARGS, "--pass-when", "rouge=1"]) == 2
    assert main(["compare", str(tmp_path / "missing.jsonl"), *config, "--baseline", "b"]) == 1


def test_a_kpi_shows_its_run_level_values_beside_its_per_item_means(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tools_ok = tool_call_accuracy >= 0.9 (issue #23, item 10): per trace it holds half the time in the
    # baseline (mean 0.500), but the formula on the run's mean accuracy (0.500, 0.883) is 0 for both runs.
    settings = tmp_path / "settings.toml"
    settings.write_text(
        (EXAMPLE / "settings.toml").read_text()
        + '\n[[targets.kpis]]\nname = "tools_ok"\nformula = "threshold"\nmetric = "tool_call_accuracy"\n'
        'threshold = 0.9\ndirection = ">="\n',
        encoding="utf-8",
    )
    args = ["compare", str(EXAMPLE), "--config", str(settings), "--baseline", "baseline", "--resamples", "199"]
    assert main([*args, "--json"]) == 0
    [comparison] = json.loads(capsys.readouterr().out)["comparisons"]
    tools_ok = next(m for m in comparison["metrics"] if m["name"] == "tools_ok")
    assert tools_ok["baseline"]["mean"] == pytest.approx(0.5)
    assert tools_ok["run_level"] == {"baseline": 0.0, "candidate": 0.0}
    assert next(m for m in comparison["metrics"] if m["name"] == "rouge")["run_level"] is None  # not a KPI

    assert main(args) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert "tools_ok is a KPI: compared here per item, the mean of its per-trace values (0.500 → 0.883)" in table
    assert "its run-level value, the formula applied to each run's metric means, is 0.000 → 0.000" in table

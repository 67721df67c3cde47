"""``trace-scorer calibrate`` as a user runs it on the shipped example and on labelled sample files: the
figures are the libraries' on the file's data, judge-large agrees and judge-small does not, the tuned
threshold is not the default, ``--write`` copies the settings with it, the HTML report holds its plots."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from sklearn import metrics

from trace_scorer.cli import main

EXAMPLE = Path(__file__).parents[3] / "examples" / "calibrate"


def _run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["calibrate", *args])
    return code, out.getvalue()


def _example_lines() -> list[dict[str, Any]]:
    text = (EXAMPLE / "labelled.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def helpful() -> dict[str, Any]:
    code, out = _run([str(EXAMPLE), "--metric", "helpful", "--json", "--resamples", "500"])
    assert code == 0
    return json.loads(out)  # type: ignore[no-any-return]


def test_each_models_agreement_is_scikit_learns_on_the_files_data(helpful: dict[str, Any]) -> None:
    lines = _example_lines()
    labels = [1 if sum(line["labels"]["helpful"]) / 2 >= 0.5 else 0 for line in lines]
    raters = {r["rater"]: r for r in helpful["raters"]}
    assert list(raters) == ["helpful (panel)", "judge-large", "judge-mid", "judge-small"]
    for model in ("judge-large", "judge-mid", "judge-small"):
        verdicts = [int(line["judges"]["helpful"]["models"][model]["value"]) for line in lines]
        figures = raters[model]["figures"]
        assert figures["kappa"]["value"] == pytest.approx(metrics.cohen_kappa_score(labels, verdicts), abs=1e-6)
        assert figures["f1"]["value"] == pytest.approx(metrics.f1_score(labels, verdicts), abs=1e-6)
        assert raters[model]["confusion"] == metrics.confusion_matrix(labels, verdicts).tolist()
        assert raters[model]["items"] == 240
    # One judge agrees with the people, another barely better than chance: the intervals do not overlap.
    large, small = raters["judge-large"]["figures"]["kappa"], raters["judge-small"]["figures"]["kappa"]
    assert large["low"] > 0.6 and small["high"] < 0.35
    assert raters["judge-large"]["cost_per_100"] == pytest.approx(0.63)
    assert raters["helpful (panel)"]["cost_per_100"] == pytest.approx(0.78)


def test_alpha_strictness_and_panels_of_the_example(helpful: dict[str, Any]) -> None:
    assert 0.3 < helpful["krippendorff_alpha"]["value"] < 0.8
    strictness = helpful["strictness"]
    assert strictness["judge-large"]["alpha"]["value"] > 0.7 > strictness["judge-small"]["alpha"]["value"]
    assert strictness["judge-small"]["unanimous"] < 0.5 and strictness["judge-large"]["items"] == 240
    panels = helpful["panels"]
    assert panels["chosen"]["models"] == ["judge-mid"]  # within 0.05 of the best at a fraction of the price
    assert panels["best"]["agreement"] - panels["chosen"]["agreement"] <= 0.05
    difference = panels["difference"]
    assert difference["low"] <= 0 <= difference["high"]  # the gap may be chance
    assert len(panels["panels"]) == 3 + 3 * 2 + 3  # singles; pairs by any/all; the three under three rules


def test_the_threshold_tuned_on_the_labels_is_not_the_default() -> None:
    code, out = _run([str(EXAMPLE), "--metric", "answer_similarity", "--label", "correct", "--json"])
    assert code == 0
    found = json.loads(out)
    assert found["threshold"] == {"value": 0.8, "source": "pass_at_k's threshold in target 'support'"}
    tuning = found["tuning"]
    assert 0.66 < tuning["threshold"] < 0.74 and tuning["default"] == 0.8
    low, high = tuning["interval"]
    assert low <= tuning["threshold"] <= high
    assert tuning["objective_value"] > 0.9 > 0.6 > tuning["default_value"]
    assert tuning["cv_value"] > tuning["cv_default_value"] + 0.3
    lines = _example_lines()
    labels = [line["labels"]["correct"] for line in lines]
    values = [line["scores"]["answer_similarity"] for line in lines]
    assert tuning["default_value"] == pytest.approx(metrics.f1_score(labels, [v >= 0.8 for v in values]), abs=1e-6)
    assert tuning["objective_value"] == pytest.approx(
        metrics.f1_score(labels, [v >= tuning["threshold"] for v in values]), abs=1e-5
    )


def test_write_copies_the_settings_with_the_tuned_threshold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    copy = tmp_path / "tuned.toml"
    args = [str(EXAMPLE), "--metric", "answer_similarity", "--label", "correct", "--write", str(copy)]
    assert _run(args)[0] == 0
    text = copy.read_text(encoding="utf-8")
    assert "# an attempt is correct when answer_similarity ≥ threshold" in text  # comments kept
    tuned = tomllib.loads(text)["targets"][0]["metrics"][2]["threshold"]
    assert 0.66 < tuned < 0.74
    original = tomllib.loads((EXAMPLE / "settings.toml").read_text(encoding="utf-8"))
    assert original["targets"][0]["metrics"][2]["threshold"] == 0.8  # the original untouched
    assert "wrote" in capsys.readouterr().err
    # An existing file is not replaced without --force, before any work.
    assert _run(args)[0] == 2
    assert "exists: not overwritten (--force replaces it)" in capsys.readouterr().err
    assert _run([*args, "--force"])[0] == 0


def test_write_needs_a_threshold_in_the_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([str(EXAMPLE), "--metric", "helpful", "--write", str(tmp_path / "x.toml")])[0] == 2
    assert "turns helpful into a verdict nowhere" in capsys.readouterr().err
    assert not (tmp_path / "x.toml").exists()


def test_labelled_sample_files_are_scored_as_score_scores_them(tmp_path: Path) -> None:
    """Samples with ``metadata.labels``: rouge computed here, then calibrated against the labels."""
    lines = []
    answers = [
        ("Paris is the capital of France.", "The capital of France is Paris.", True),
        ("It is 18 degrees in Tokyo.", "Tokyo: 18 degrees, sunny.", True),
        ("I cannot help with that.", "The order ships on Monday.", False),
        ("Your order ships Monday.", "The order ships on Monday.", True),
        ("Bananas are yellow.", "The refund takes five days.", False),
        ("Refunds take five days.", "The refund takes five days.", True),
        ("Please restart the router.", "The invoice is attached.", False),
        ("No idea.", "Berlin is the capital of Germany.", False),
    ]
    for index, (response, expected, correct) in enumerate(answers):
        lines.append(
            {"id": f"s{index}", "response": response, "expected": expected, "metadata": {"labels": {"ok": correct}}}
        )
    lines.append({"id": "unlabelled", "response": "x", "expected": "y"})
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    settings = tmp_path / "settings.toml"
    settings.write_text('[[targets]]\nname = "t"\n  [[targets.metrics]]\n  metric = "rouge"\n', encoding="utf-8")
    code, out = _run([str(path), "--config", str(settings), "--metric", "rouge", "--label", "ok", "--json"])
    assert code == 0
    found = json.loads(out)
    assert found["items"] == 8 and found["left_out"] == {"no label 'ok'": 1}
    [rater] = found["raters"]
    assert rater["rater"] == "rouge" and sum(map(sum, rater["confusion"])) == 8
    assert found["tuning"]["objective_value"] == 1.0  # rouge separates these answers


def test_nothing_labelled_is_exit_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scored.jsonl"
    path.write_text(json.dumps({"id": "a", "scores": {"rouge": 0.5}}) + "\n", encoding="utf-8")
    assert _run([str(path), "--metric", "rouge"])[0] == 1
    assert "no labelled item of rouge could be read (1 no label 'rouge')" in capsys.readouterr().err


def test_mixed_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"id": "a", "scores": {"rouge": 0.5}, "labels": {"rouge": 1}}) + "\n"
        + json.dumps({"id": "b", "response": "x", "expected": "y"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    assert _run([str(path), "--metric", "rouge"])[0] == 2
    assert "mix score --json lines" in capsys.readouterr().err


def test_the_terminal_table_names_the_chosen_panel(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run([str(EXAMPLE), "--metric", "helpful", "--resamples", "200"])
    assert code == 0
    assert "cheapest panel within 0.05 of the best: judge-mid" in out
    assert "judge-small" in out and "Krippendorff's α" in out


def test_the_html_report_holds_every_plot(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    code, _ = _run([str(EXAMPLE), "--metric", "helpful", "--resamples", "200", "--html", str(report)])
    assert code == 0
    page = report.read_text(encoding="utf-8")
    for plot in ("agreement", "threshold", "cost"):
        assert f'data-plot="{plot}"' in page
    assert page.count('data-plot="confusion"') == 4
    assert page.count("<svg") == 7 and "<script" not in page
    assert 'data-panel="judge-mid"' in page


def test_numeric_labels_get_rank_and_linear_agreement(tmp_path: Path) -> None:
    """A 1–5 rating judged by two models on the same scale: weighted κ, Spearman, Pearson, MAE, α (interval)."""
    from scipy import stats

    ratings = [1, 2, 3, 4, 5, 3, 2, 4, 5, 1, 3, 4]
    close = [1, 2, 3, 5, 5, 3, 2, 4, 4, 1, 3, 4]
    far = [3, 3, 2, 2, 4, 5, 1, 3, 2, 4, 5, 1]
    path = tmp_path / "rated.jsonl"
    lines = [
        {
            "id": f"r{i}",
            "scores": {"quality": (a + b) / 2},
            "judges": {"quality": {"models": {"close": {"value": float(a)}, "far": {"value": float(b)}}}},
            "labels": {"quality": rating},
        }
        for i, (rating, a, b) in enumerate(zip(ratings, close, far, strict=True))
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    code, out = _run([str(path), "--metric", "quality", "--json", "--resamples", "300"])
    assert code == 0
    found = json.loads(out)
    assert found["kind"] == "numeric" and found["tuning"] is None
    raters = {r["rater"]: r["figures"] for r in found["raters"]}
    assert raters["close"]["weighted_kappa"]["value"] == pytest.approx(
        metrics.cohen_kappa_score(ratings, close, weights="quadratic"), abs=1e-6
    )
    assert raters["close"]["spearman"]["value"] == pytest.approx(stats.spearmanr(ratings, close).statistic, abs=1e-6)
    assert raters["far"]["mae"]["value"] == pytest.approx(metrics.mean_absolute_error(ratings, far), abs=1e-6)
    assert raters["quality (panel)"]["weighted_kappa"]["value"] is None  # half-points: not categories
    assert raters["close"]["spearman"]["low"] > raters["far"]["spearman"]["high"]
    # Panels of numeric scores: each model, and the mean of both, by Spearman with the ratings.
    panels = found["panels"]
    assert panels["figure"] == "spearman" and panels["items"] == len(ratings)
    by_name = {(tuple(p["models"]), p["rule"]): p["agreement"] for p in panels["panels"]}
    mean = [(a + b) / 2 for a, b in zip(close, far, strict=True)]
    assert by_name[(("close", "far"), "mean")] == pytest.approx(stats.spearmanr(ratings, mean).statistic, abs=1e-6)
    assert panels["best"]["models"] == ["close"]
    assert found["krippendorff_alpha"]["value"] is not None


def test_a_threshold_kpi_is_tuned_and_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text(
        '[[targets]]\nname = "t"\n  [[targets.metrics]]\n  metric = "rouge"\n'
        '  [[targets.kpis]]\n  name = "good_answer"  # the verdict\n  formula = "threshold"\n'
        '  metric = "rouge"\n  threshold = 0.9\n',
        encoding="utf-8",
    )
    path = tmp_path / "scored.jsonl"
    values = [0.2, 0.3, 0.35, 0.4, 0.55, 0.6, 0.7, 0.8, 0.85, 0.95]
    path.write_text(
        "".join(
            json.dumps({"id": f"i{i}", "scores": {"rouge": v}, "labels": {"ok": v >= 0.5}}) + "\n"
            for i, v in enumerate(values)
        ),
        encoding="utf-8",
    )
    copy = tmp_path / "tuned.toml"
    args = [str(path), "--config", str(settings), "--metric", "rouge", "--label", "ok", "--json", "--write", str(copy)]
    code, out = _run(args)
    assert code == 0
    found = json.loads(out)
    assert found["threshold"]["source"] == "KPI 'good_answer' in target 't'" and found["tuning"]["default"] == 0.9
    assert found["tuning"]["threshold"] == 0.55 and found["tuning"]["objective_value"] == 1.0
    text = copy.read_text(encoding="utf-8")
    assert "threshold = 0.55" in text and "# the verdict" in text
    assert "threshold = 0.9" in settings.read_text(encoding="utf-8")


def test_calibrate_help_lists_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["calibrate", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--metric", "--label", "--langfuse", "--push-to-queue", "--write", "--html", "--objective"):
        assert option in out


def test_the_html_report_of_numeric_labels(tmp_path: Path) -> None:
    path = tmp_path / "rated.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "scores": {"q": v / 5}, "labels": {"q": round(v / 5 + d, 2)}}) + "\n"
            for i, (v, d) in enumerate([(1, 0.1), (2, -0.05), (3, 0.0), (4, 0.1), (5, -0.1), (2, 0.2), (4, -0.2)])
        ),
        encoding="utf-8",
    )
    report = tmp_path / "report.html"
    assert _run([str(path), "--metric", "q", "--resamples", "200", "--html", str(report)])[0] == 0
    page = report.read_text(encoding="utf-8")
    assert 'data-plot="agreement"' in page and "Spearman" in page
    assert 'data-plot="confusion"' not in page and 'data-plot="threshold"' not in page


def test_without_the_calibrate_extra_the_install_command_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "krippendorff", None)  # find_spec: None, as when not installed
    assert _run([str(EXAMPLE), "--metric", "helpful"])[0] == 2
    err = capsys.readouterr().err
    assert "calibrate needs krippendorff (the 'calibrate' extra)" in err and "[calibrate]" in err

"""The offline ``trace-scorer score`` command: outputs and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trace_scorer import cli
from trace_scorer.metrics.registry import MetricRegistry

TOY_CONFIG = """
[log]
level = "WARNING"
[[targets]]
name = "toy"
group_by = "run_id"
  [[targets.metrics]]
  metric = "toy_metadata_value"
  name = "v"
  [[targets.metrics]]
  metric = "toy_halved"
  name = "half"
  source = "v"
  [[targets.metrics]]
  metric = "toy_share_above"
  name = "share"
  source = "v"
  [[targets.kpis]]
  name = "k"
  formula = "expression"
  expression = "v + half"
"""


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_registry: MetricRegistry) -> None:
    monkeypatch.chdir(tmp_path)  # no ./settings.toml unless a test writes one
    monkeypatch.setattr("trace_scorer.metrics.registry.default_registry", lambda: toy_registry)
    for variable in ("TRACE_SCORER_LOG__LEVEL", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(variable, raising=False)


def write_samples(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sample_line(sample_id: str, x: float | None = None, run: str = "r1") -> str:
    metadata = {} if x is None else {"x": x}
    return json.dumps({"id": sample_id, "metadata": metadata, "run_id": run})


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["score", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lines_per_sample_then_per_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "settings.toml").write_text(TOY_CONFIG)
    data = write_samples(
        tmp_path / "s.jsonl", [sample_line("a", 0.8), sample_line("b", 0.2), sample_line("c", None, run="r2")]
    )
    code, out, err = run(capsys, str(data), "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0] == {
        "id": "a",
        "scores": {"v": 0.8, "half": 0.4},
        "kpis": {"k": 1.2},
        "skipped": {},
        "failed": {},
        "notes": [],
    }
    assert lines[2]["skipped"] == {
        "v": "metadata.x absent",
        "half": "v has no value",
        "k": "k: input 'v' has no value (metadata.x absent)",
    }
    assert lines[3] == {
        "group": "r1",
        "size": 2,
        "scores": {"v": 0.5, "half": 0.25, "share": 0.5, "share_n": 0.02},
        "kpis": {"k": 0.75},
        "skipped": {},
        "failed": {},
    }
    assert lines[4]["group"] == "r2" and lines[4]["scores"] == {}


def test_table_with_summary_and_reasons(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text(TOY_CONFIG)
    data = write_samples(tmp_path / "s.jsonl", [sample_line("first", 1.0), sample_line("second", None)])
    code, out, _ = run(capsys, str(data), "--config", str(config))
    assert code == 0
    assert "target toy: 2 samples" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 2}
    assert "1.000" in rows["first"] and "0.500" in rows["first"]
    assert "–" in rows["second"]
    summary = rows["mean of 2"]
    assert "1.000 (1 skipped)" in summary
    assert "v: skipped ×1: metadata.x absent" in out
    assert "groups" in out and "r1" in out


def test_unreadable_lines_are_reported_and_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "settings.toml").write_text(TOY_CONFIG)
    data = write_samples(
        tmp_path / "s.jsonl",
        [sample_line("a", 0.5), "{not json", '{"id": "b", "mesages": []}', "[1, 2]", "", sample_line("c", 0.1)],
    )
    code, out, err = run(capsys, str(data), "--json")
    assert code == 0
    assert [json.loads(line).get("id") for line in out.splitlines()][:2] == ["a", "c"]
    assert f"{data}: line 2: invalid JSON" in err
    assert f"{data}: line 3: mesages: unknown field" in err
    assert f"{data}: line 4: expected a JSON object, got list" in err


def test_json_array_file_and_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "settings.toml").write_text(TOY_CONFIG)
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps([json.loads(sample_line("a", 0.5)), {"id": "bad", "role": 1}]))
    write_samples(folder / "sub" / "b.jsonl", [sample_line("b", 0.25)])
    (folder / "ignored.txt").write_text("not an input")
    code, out, err = run(capsys, str(folder), "--json")
    assert code == 0
    ids = [json.loads(line).get("id") for line in out.splitlines() if "id" in json.loads(line)]
    assert ids == ["a", "b"]
    assert "a.json: item 1: role: unknown field" in err


def test_nothing_readable_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_samples(tmp_path / "s.jsonl", ["garbage", "more garbage"])
    code, out, err = run(capsys, str(data))
    assert code == 1
    assert "no sample could be read" in err
    assert out == ""
    assert run(capsys, str(tmp_path / "missing.jsonl"))[0] == 1


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("[[targets]]\nname='t'\n[[targets.metrics]]\nmetric='nope'\n", "targets[0].metrics[0].metric: unknown metric"),
        ("[[targets]]\nname='t'\n[[targets.metrics]]\nmetric='toy_halved'\n", "targets[0].metrics[0].source: Field"),
        ("[bogus]\nx=1\n", "bogus: unknown key"),
    ],
)
def test_configuration_error_exits_2_before_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    (tmp_path / "settings.toml").write_text(config)
    data = write_samples(tmp_path / "s.jsonl", [sample_line("a", 0.5)])
    code, out, err = run(capsys, str(data))
    assert code == 2
    assert message in err
    assert out == ""


def test_target_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two = TOY_CONFIG + "\n[[targets]]\nname = 'other'\n[[targets.metrics]]\nmetric = 'toy_metadata_value'\n"
    (tmp_path / "settings.toml").write_text(two)
    data = write_samples(tmp_path / "s.jsonl", [sample_line("a", 0.5)])
    code, _, err = run(capsys, str(data))
    assert code == 2 and "several targets are configured (toy, other): choose one with --target" in err
    code, out, _ = run(capsys, str(data), "--target", "other", "--json")
    assert code == 0 and json.loads(out.splitlines()[0])["scores"] == {"toy_metadata_value": 0.5}
    code, _, err = run(capsys, str(data), "--target", "ghost")
    assert code == 2 and "--target 'ghost': no such target" in err


def test_without_configuration_uses_deterministic_metrics_whose_inputs_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_samples(tmp_path / "s.jsonl", [sample_line("a", 0.5)])
    code, out, _ = run(capsys, str(data), "--json")
    assert code == 0
    first = json.loads(out.splitlines()[0])
    # toy_metadata_value needs no option and no judge: it runs. toy_halved needs an option, toy_needs_judge a judge.
    assert first["scores"]["toy_metadata_value"] == 0.5
    assert "toy_halved" not in first["scores"] and "toy_needs_judge" not in first["scores"]


def test_console_script_entry_point(tmp_path: Path) -> None:
    data = write_samples(tmp_path / "s.jsonl", ["{broken"])
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "score", str(data)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 1
    assert "line 1: invalid JSON" in done.stderr

"""Which settings file ``score`` uses (issue 23 item 5): ``--config``, else a single folder's own
settings.toml, else ./settings.toml, else none — and it says which on stderr, also with ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_scorer.cli import main

SAMPLE = {
    "id": "s1",
    "response": "Tokyo: 18 C",
    "expected": "Tokyo: 18 C",
    "tool_calls": [],
    "reference_tool_calls": [],
}
ROUGE_ONLY = '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "rouge"\n'
BLEU_ONLY = '[[targets]]\nname = "t"\n[[targets.metrics]]\nmetric = "bleu"\n'


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "s.jsonl").write_text(json.dumps(SAMPLE) + "\n")
    return data


def score(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict[str, object], str]:
    assert main(["score", *args, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out.splitlines()[0]), err


def test_a_folder_with_its_own_settings_is_scored_with_them(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "settings.toml").write_text(ROUGE_ONLY)
    Path("settings.toml").write_text(BLEU_ONLY)  # the folder's own wins over ./settings.toml
    line, err = score(capsys, str(folder))
    assert set(line["scores"]) == {"rouge"}  # type: ignore[arg-type]
    assert f"settings: {folder / 'settings.toml'} (the folder's own" in err


def test_config_wins_over_the_folders_settings(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "settings.toml").write_text(ROUGE_ONLY)
    other = folder.parent / "other.toml"
    other.write_text(BLEU_ONLY)
    line, err = score(capsys, str(folder), "--config", str(other))
    assert set(line["scores"]) == {"bleu"}  # type: ignore[arg-type]
    assert f"settings: {other}\n" in err


def test_the_working_folders_settings_otherwise(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("settings.toml").write_text(BLEU_ONLY)
    line, err = score(capsys, str(folder / "s.jsonl"))
    assert set(line["scores"]) == {"bleu"}  # type: ignore[arg-type]
    assert "settings: ./settings.toml" in err


def test_no_settings_file_is_said_too(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line, err = score(capsys, str(folder))
    assert "rouge" in line["scores"]  # type: ignore[operator]
    assert "settings: none (every deterministic metric with its inputs)" in err


def test_several_paths_do_not_pick_a_folders_settings(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "settings.toml").write_text(BLEU_ONLY)
    _line, err = score(capsys, str(folder), str(folder / "s.jsonl"))
    assert "settings: none" in err

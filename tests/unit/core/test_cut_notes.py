"""``score`` says when a metric scored only the beginning of a text longer than its ``max_chars`` (issue 22
item 14): a note on the sample, in ``--json`` and under the table, whichever way the samples were scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_scorer import cli

CONFIG = """
[log]
level = "WARNING"
[[targets]]
name = "text"
  [[targets.metrics]]
  metric = "rouge"
  max_chars = 100
  [[targets.metrics]]
  metric = "bleu"
  name = "b"
"""
LONG = "the weather in tokyo is mild " * 20  # 580 characters


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACE_SCORER_LOG__LEVEL", raising=False)


def write(tmp_path: Path, config: str | None) -> list[str]:
    samples = tmp_path / "s.jsonl"
    lines = [
        {"id": "long", "response": LONG, "expected": "the weather in tokyo is mild"},
        {"id": "short", "response": "mild", "expected": "mild weather"},
    ]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines))
    args = [str(samples)]
    if config is not None:
        (tmp_path / "settings.toml").write_text(config)
        args += ["--config", str(tmp_path / "settings.toml")]
    return args


def notes(out: str) -> dict[str, list[str]]:
    return {line["id"]: line["notes"] for line in map(json.loads, out.splitlines()) if "id" in line}


def test_json_notes_each_text_cut_to_max_chars(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["score", *write(tmp_path, CONFIG), "--json"]) == 0
    assert notes(capsys.readouterr().out) == {
        "long": ["rouge: response cut to its first 98 of 580 characters (max_chars 100)"],
        "short": [],
    }


def test_the_table_lists_the_cut_texts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["score", *write(tmp_path, CONFIG)]) == 0
    out = capsys.readouterr().out
    assert "Notes" in out and "long: rouge: response cut to its first 98 of 580 characters (max_chars 100)" in out


def test_without_configuration_the_default_limit_is_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = write(tmp_path, None)
    samples = Path(args[0])
    samples.write_text(json.dumps({"id": "huge", "response": "word " * 12_000, "expected": "word"}) + "\n")
    assert cli.main(["score", *args, "--json"]) == 0
    assert notes(capsys.readouterr().out) == {
        "huge": [
            "bleu: response cut to its first 49,999 of 60,000 characters (max_chars 50,000)",
            "rouge: response cut to its first 49,999 of 60,000 characters (max_chars 50,000)",
        ]
    }

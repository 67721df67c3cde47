"""The published JSON Schema matches the Sample model and accepts the shipped examples."""

from __future__ import annotations

import json

import jsonschema

from tests.support.paths import ROOT
from trace_scorer.offline.read import load_inputs
from trace_scorer.schema import sample_file_schema


def test_committed_schema_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "sample.schema.json").read_text(encoding="utf-8"))
    assert committed == sample_file_schema(), "regenerate: python -m trace_scorer.schema > docs/sample.schema.json"


def test_examples_validate_and_load() -> None:
    validator = jsonschema.Draft202012Validator(sample_file_schema())
    files = sorted((ROOT / "examples" / "samples").glob("*.jsonl"))
    assert files
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            validator.validate(json.loads(line))
    loaded = load_inputs(files)
    assert not loaded.errors
    assert len(loaded.samples) >= 8


def test_schema_accepts_string_arguments_and_aliases_and_rejects_unknown_fields() -> None:
    validator = jsonschema.Draft202012Validator(sample_file_schema())
    validator.validate(
        {
            "messages": [{"role": "human", "content": "hi"}, {"role": "ai", "content": None}],
            "tool_calls": [{"name": "a", "arguments": '{"x": 1}'}],
        }
    )
    errors = list(validator.iter_errors({"id": "x", "respnse": "typo"}))
    assert errors and "respnse" in errors[0].message

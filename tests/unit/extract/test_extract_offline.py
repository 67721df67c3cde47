"""Offline: telling observation rows from sample records, grouping by trace, joining items,
and the example exports in examples/traces."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT
from trace_scorer.extract import (
    index_items,
    looks_like_experiment_item,
    looks_like_observation_row,
    samples_from_rows,
)

EXAMPLES = ROOT / "examples" / "traces"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def example_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        if path.name != "experiment_items.jsonl":
            rows.extend(read_jsonl(path))
    return rows


def test_format_detection():
    rows = example_rows()
    items = read_jsonl(EXAMPLES / "experiment_items.jsonl")
    assert all(looks_like_observation_row(row) for row in rows)
    assert not any(looks_like_experiment_item(row) for row in rows)
    assert all(looks_like_experiment_item(item) for item in items)
    assert not any(looks_like_observation_row(item) for item in items)
    sample_records = [
        {"id": "s1", "messages": [{"role": "user", "content": "hi"}], "response": "hello"},
        {"id": "s2", "trace_id": "t", "response": "x", "tool_calls": [], "expected": "y"},
        {"id": "s3", "traceId": "t", "type": "GENERATION", "response": "x"},  # a sample key wins
    ]
    assert not any(looks_like_observation_row(record) for record in sample_records)
    assert not any(looks_like_experiment_item(record) for record in sample_records)
    assert not looks_like_observation_row(["not", "a", "mapping"])


def test_samples_from_rows_groups_by_trace_in_any_row_order():
    rows = example_rows()
    random.Random(7).shuffle(rows)
    items, problems = index_items(read_jsonl(EXAMPLES / "experiment_items.jsonl"))
    assert problems == []
    samples = {s.id: s for s in samples_from_rows(rows, items=items)}

    assert len(samples) == len({row["traceId"] for row in rows}) == 7
    flight = next(s for s in samples.values() if s.item_id == "item-flight-paris")
    assert flight.tool_calls is not None and flight.reference_tool_calls is not None
    assert [c.name for c in flight.tool_calls] == [c.name for c in flight.reference_tool_calls]
    assert flight.expected == "Ivan Petrov is booked on Air France AF123 to Paris on 2024-01-15."
    assert flight.run_id is not None
    order = next(s for s in samples.values() if s.item_id == "item-order-b77")
    assert order.reference_tool_calls is not None
    assert [c.name for c in order.reference_tool_calls] == ["lookup_order", "track_parcel"]
    # Every example reads cleanly except the crashed run, whose note says why it has no answer.
    noted = {s.id: s.notes for s in samples.values() if s.notes}
    assert list(noted) == [next(s.id for s in samples.values() if s.response == "")]


def test_items_without_rows_still_give_a_sample():
    item = {
        "traceId": "t-lonely",
        "experimentId": "e",
        "experimentItemId": "i",
        "output": "42",
        "expectedOutput": "42",
    }
    samples = list(samples_from_rows([], items={"t-lonely": item}))
    assert len(samples) == 1
    assert (samples[0].id, samples[0].response, samples[0].expected) == ("t-lonely", "42", "42")
    assert samples[0].tool_calls is None
    assert any("no observation rows" in note for note in samples[0].notes)


def test_rows_without_trace_id_form_one_trace(make_row):
    rows = [make_row("root", output="answer"), make_row("t", "TOOL", "f", parent="root", input={})]
    for row in rows:
        del row["traceId"]
    (sample,) = samples_from_rows(rows)
    assert sample.id == "root"
    assert sample.tool_calls is not None and [c.name for c in sample.tool_calls] == ["f"]
    assert any("no traceId" in note for note in sample.notes)


def test_index_items_reports_what_cannot_be_joined():
    index, problems = index_items(
        [{"traceId": "a", "expectedOutput": 1}, {"expectedOutput": 2}, "junk", {"traceId": "a"}]
    )
    assert list(index) == ["a"] and index["a"] == {"traceId": "a"}
    assert [position for position, _ in problems] == [1, 2, 3]
    assert "without a traceId" in problems[0][1] and "a second experiment item for trace a" in problems[2][1]

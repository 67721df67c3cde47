"""Rows: JSON fields, repeated rows, the tree and its order, roots, rows of other traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from trace_scorer.data.times import parse_time, parse_timestamp
from trace_scorer.extract import extract_sample
from trace_scorer.extract.model import Notes
from trace_scorer.extract.rows import (
    Observation,
    dedupe_observations,
    dedupe_rows,
    parse_json_field,
    to_observation,
    trace_order,
)


def test_json_strings_are_parsed_and_other_strings_kept():
    assert parse_json_field('{"a": [1, 2]}') == {"a": [1, 2]}
    assert parse_json_field("Book me a flight") == "Book me a flight"
    assert parse_json_field('"quoted"') == "quoted"
    assert parse_json_field({"already": "parsed"}) == {"already": "parsed"}


def test_repeated_rows_keep_the_newest_updated_at(make_row):
    started = make_row("g", "GENERATION", output=None, updatedAt="2026-03-01T10:00:00.100Z")
    finished = make_row("g", "GENERATION", output="final", updatedAt="2026-03-01T10:00:02.000Z")
    for rows in ([started, finished], [finished, started]):
        kept = dedupe_rows(rows, Notes())
        assert len(kept) == 1
        assert kept[0]["output"] == "final"


def test_repeated_rows_with_offsets_compare_as_times(make_row):
    # 10:00:01+02:00 is 08:00:01Z: older than 09:00Z although it sorts later as a string.
    a = make_row("g", output="newer", updatedAt="2026-03-01T09:00:00Z")
    b = make_row("g", output="older", updatedAt="2026-03-01T10:00:01+02:00")
    assert dedupe_rows([a, b], Notes())[0]["output"] == "newer"


def test_row_without_updated_at_loses_to_one_with_it(make_row):
    a = make_row("g", output="dated", updatedAt="2026-03-01T09:00:00Z")
    b = make_row("g", output="undated")
    del b["updatedAt"]
    assert dedupe_rows([a, b], Notes())[0]["output"] == "dated"


def test_repeated_rows_do_not_double_calls(make_row):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    generation = make_row(
        "g", "GENERATION", parent="root", input="go", output={"role": "assistant", "tool_calls": [call]}
    )
    tool = make_row("t", "TOOL", "f", parent="root", input={}, output="ok")
    rows = [make_row("root", output="done"), generation, dict(generation), tool, dict(tool)]
    sample = extract_sample(rows)
    assert sample.tool_calls is not None and [c.name for c in sample.tool_calls] == ["f"]


def test_tree_order_is_depth_first_by_start_time_whatever_the_row_order(make_row):
    rows = [
        make_row("late-child", parent="b", at=9),
        make_row("b", parent="root", at=5),
        make_row("a-child", parent="a", at=3),
        make_row("a", parent="root", at=2),
        make_row("root", at=1),
        make_row("early-child-of-b", parent="b", at=6),
    ]
    notes = Notes()
    observations = [to_observation(r, i, notes) for i, r in enumerate(rows)]
    ordered = [o.id for o in trace_order(observations, notes)]
    assert ordered == ["root", "a", "a-child", "b", "early-child-of-b", "late-child"]
    assert notes.as_list() == []


def test_parent_cycle_does_not_hang_and_is_noted(make_row):
    rows = [make_row("x", parent="y"), make_row("y", parent="x"), make_row("root")]
    notes = Notes()
    observations = [to_observation(r, i, notes) for i, r in enumerate(rows)]
    ordered = trace_order(observations, notes)
    assert {o.id for o in ordered} == {"x", "y", "root"}
    assert any("cycle" in note for note in notes.as_list())


def test_root_metadata_ids_and_rows_of_other_traces(make_row):
    rows = [
        make_row("root", "AGENT", output="hi", metadata={"tenant": "acme"}, environment="prod-eu"),
        make_row("other", trace="trace-2"),
    ]
    sample = extract_sample(rows, trace_id="trace-1")
    assert sample.id == "trace-1"
    assert sample.observation_id == "root"
    assert sample.metadata == {"tenant": "acme"}
    assert sample.environment == "prod-eu"
    assert any("other traces" in note for note in sample.notes)


def test_metadata_as_json_string_is_parsed(make_row):
    sample = extract_sample([make_row("root", output="x", metadata='{"tenant": "acme"}')])
    assert sample.metadata == {"tenant": "acme"}


def test_bad_rows_are_noted_and_skipped(make_row):
    rows = [42, "text", None, make_row("root", output="answer")]
    sample = extract_sample(rows)  # type: ignore[arg-type]
    assert sample.response == "answer"
    assert any("not JSON objects" in note for note in sample.notes)


def test_no_rows_gives_an_empty_sample_with_a_note():
    sample = extract_sample([], trace_id="t-9")
    assert sample.id == "t-9"
    assert sample.response is None and sample.tool_calls is None and sample.messages is None
    assert sample.notes == ["no observation rows for this trace"]


def test_root_without_generations_or_tools_leaves_calls_unknown(make_row):
    sample = extract_sample([make_row("root", "SPAN", input="hello", output="Hello!")])
    assert sample.response == "Hello!"
    assert sample.tool_calls is None
    assert any("tool calls made are unknown" in note for note in sample.notes)


def test_one_time_parser_reads_z_offsets_and_fractions_of_any_length():
    base = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
    assert parse_time("2026-03-01T10:00:00Z") == base
    assert parse_time("2026-03-01T12:00:00+02:00") == base
    assert parse_time("2026-03-01T10:00:00") == base  # no offset: UTC
    assert parse_time("2026-03-01T10:00:00.5Z") == base + timedelta(milliseconds=500)
    assert parse_time("2026-03-01T10:00:00.123Z") == base + timedelta(milliseconds=123)
    assert parse_time("2026-03-01T10:00:00.123456789Z") == base + timedelta(microseconds=123456)
    assert parse_time("2026-03-01T10:00:00.1234567-01:30") == base + timedelta(hours=1, minutes=30, microseconds=123456)
    assert parse_time(datetime(2026, 3, 1, 10)) == base
    assert parse_time(datetime(2026, 3, 1, 11, tzinfo=timezone(timedelta(hours=1)))) == base
    for not_a_time in ("", "yesterday", None, 5, {"t": 1}):
        assert parse_time(not_a_time) is None
    assert parse_timestamp("2026-03-01T10:00:00Z") == base
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")

    class Text(str):
        pass

    for text in ("2026-03-01T12:00:00+02:00", "2026-03-01T10:00:00"):  # a string, or a subclass: the same
        for given in (text, Text(text)):
            parsed = parse_time(given)
            assert parsed == parse_timestamp(text) and parsed is not None
            assert parsed.tzinfo == parse_timestamp(text).tzinfo  # the offset given kept
    assert parse_time(Text("")) is None and parse_time(Text("yesterday")) is None


def test_extraction_and_the_langfuse_adapter_keep_the_same_row(make_row):
    """One rule (trace_scorer.data.rows.replaces) for both de-duplicators."""
    cases = [
        ("2026-03-01T10:00:00Z", "2026-03-01T10:00:01Z"),  # newer later
        ("2026-03-01T10:00:01Z", "2026-03-01T10:00:00Z"),  # newer first
        ("2026-03-01T10:00:00Z", "2026-03-01T12:00:00+02:00"),  # a tie: the one read last
        (None, "2026-03-01T10:00:00Z"),
        ("2026-03-01T10:00:00Z", None),
        (None, None),
    ]
    for first, second in cases:
        a = make_row("g", output="first", **({"updatedAt": first} if first else {}))
        b = make_row("g", output="second", **({"updatedAt": second} if second else {}))
        a.setdefault("startTime", "2026-03-01T09:00:00Z")
        b.setdefault("startTime", "2026-03-01T09:00:00Z")
        adapter = dedupe_observations([Observation.from_row(a), Observation.from_row(b)])
        assert dedupe_rows([a, b], Notes())[0]["output"] == adapter[0].row["output"], (first, second)

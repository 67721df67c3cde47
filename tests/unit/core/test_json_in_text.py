"""``rows.json_in_text``: the one reading of a JSON value sent as a string (issue #25: it was written five
times, each reader with its own opening characters)."""

from __future__ import annotations

from trace_scorer.data.rows import json_in_text


def test_objects_and_lists_are_read_the_rest_stays_as_sent() -> None:
    assert json_in_text('{"a": [1, 2]}') == {"a": [1, 2]}
    assert json_in_text("[1, 2]") == [1, 2]
    assert json_in_text("2") == "2"  # as likely the text 2 as the number
    assert json_in_text("null") == "null"  # never "absent"
    assert json_in_text("{not json") == "{not json"
    assert json_in_text({"a": 1}) == {"a": 1}
    assert json_in_text(None) is None


def test_a_quoted_string_is_read_only_when_asked() -> None:
    assert json_in_text('"hi"') == '"hi"'
    assert json_in_text('"hi"', '{["') == "hi"


def test_leading_white_space_only_when_asked() -> None:
    assert json_in_text('  {"a": 1}') == '  {"a": 1}'
    assert json_in_text('  {"a": 1}', skip_blanks=True) == {"a": 1}
    assert json_in_text("   ", skip_blanks=True) == "   "


def test_nesting_too_deep_for_the_parser_stays_text() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert json_in_text(deep) is deep

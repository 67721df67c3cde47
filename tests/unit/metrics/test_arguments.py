"""Argument equality (docs/metrics.md "Argument equality")."""

from __future__ import annotations

from typing import Any

import pytest

from trace_scorer.metrics._arguments import (
    argument_share,
    canonicalizer,
    mismatched_keys,
    plain_equal,
    values_equal,
)
from trace_scorer.sample import ToolCall


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (0, -0.0, True),
        (True, 1, False),
        (False, 0, False),
        (True, True, True),
        ([True], [1], False),
        ({"x": False}, {"x": 0}, False),
        ("Paris", "Paris", True),
        ("Paris", "paris", False),
        ("2", 2, False),
        (None, None, True),
        (None, "null", False),
        (None, 0, False),
        ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1.0}, True),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 2, "x": 1}}, True),
        ([1, 2], [2, 1], False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([{"k": [1, {"z": True}]}], [{"k": [1.0, {"z": True}]}], True),
        ([{"k": [1, {"z": True}]}], [{"k": [1, {"z": 1}]}], False),
        (float("nan"), float("nan"), True),
        ("", None, False),
        ([], {}, False),
        ({"a": [float("nan"), 1]}, {"a": [float("nan"), 1.0]}, True),
        ({"a": 1, "b": 2}, {"a": 1, "c": 2}, False),
        ({"a": (1, True)}, {"a": [1.0, True]}, True),
        ({"a": "x", "b": None}, {"a": "x", "b": False}, False),
        ([1, [2, 3]], [1, [2, 3, 4]], False),
    ],
)
def test_default_equality_follows_json(a: Any, b: Any, equal: bool) -> None:
    assert values_equal(a, b) is equal
    assert values_equal(b, a) is equal
    # the one-pass comparison tool_call_accuracy uses in strict mode gives the same answer
    assert plain_equal(a, b) is equal
    assert plain_equal(b, a) is equal


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("2", 2, True),
        ("2.0", 2, True),
        ("2.50", 2.5, True),
        ("1e3", 1000, True),
        ("-0", 0, True),
        ("007", 7, False),  # not a JSON number: a code, not a quantity
        (" 2", 2, False),
        ("true", True, True),
        ("True", True, False),  # string forms are JSON's; casefold_strings makes this equal
        ("null", None, True),
        ("1", True, False),  # booleans are never numbers
        ([1, "2"], ["1", 2], True),
        ({"n": "3"}, {"n": 3.0}, True),
        ("abc", "abc", True),
    ],
)
def test_coerce_scalars_compares_string_forms(a: Any, b: Any, equal: bool) -> None:
    assert values_equal(a, b, coerce_scalars=True) is equal
    assert values_equal(a, b) is (a == b and type(a) is type(b))  # without the option: strict


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("Paris", "PARIS", True),
        ("Straße", "STRASSE", True),
        ("Москва", "МОСКВА", True),
        ({"city": ["Tokyo"]}, {"city": ["tokyo"]}, True),
        ("Paris", "Pariss", False),
        (1, "1", False),
    ],
)
def test_casefold_strings(a: Any, b: Any, equal: bool) -> None:
    assert values_equal(a, b, casefold_strings=True) is equal


def test_casefold_and_coerce_together() -> None:
    assert values_equal("TRUE", True, coerce_scalars=True, casefold_strings=True)
    assert not values_equal("TRUE", True, coerce_scalars=True)


def test_keys_are_compared_exactly_even_with_casefold() -> None:
    assert not values_equal({"City": "x"}, {"city": "x"}, casefold_strings=True)


def test_json_string_arguments_are_parsed_before_comparison() -> None:
    from_string = ToolCall(name="f", arguments='{"n": 1, "flag": true}')
    from_object = ToolCall(name="f", arguments={"flag": True, "n": 1.0})
    canon = canonicalizer()
    assert canon(from_string.arguments) == canon(from_object.arguments)


def test_argument_share_counts_reference_arguments() -> None:
    canon = canonicalizer()
    reference = canon({"city": "Tokyo", "units": "fahrenheit"})
    assert argument_share(canon({"city": "Tokyo", "units": "celsius"}), reference) == 0.5
    assert argument_share(canon({"city": "Tokyo", "units": "fahrenheit", "extra": 1}), reference) == 1.0
    assert argument_share(canon({}), reference) == 0.0
    assert argument_share(canon({"anything": 1}), canon({})) == 1.0  # no arguments: share 1
    assert argument_share(canon({"flag": 1}), canon({"flag": True})) == 0.0


def test_mismatched_keys_names_differing_missing_and_extra() -> None:
    canon = canonicalizer()
    keys = mismatched_keys(canon({"a": 1, "b": 3, "extra": 0}), canon({"a": 1, "b": 2, "c": 0}))
    assert keys == ["b", "c", "extra"]

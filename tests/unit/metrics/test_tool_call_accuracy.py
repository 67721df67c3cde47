"""ToolCallAccuracy: docs/metrics.md reference cases, edges, options, optimal (never greedy) matching."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.support.metrics import call, checked, sample
from trace_scorer.metrics.base import Score
from trace_scorer.metrics.registry import default_registry
from trace_scorer.metrics.tool_call_accuracy import ToolCallAccuracy, ToolCallAccuracyOptions
from trace_scorer.sample import ToolCall


def metric(**options: Any) -> ToolCallAccuracy:
    return ToolCallAccuracy("tool_call_accuracy", ToolCallAccuracyOptions.model_validate(options))


async def score(actual: list[ToolCall], reference: list[ToolCall], **options: Any) -> Score:
    s = sample(tool_calls=actual, reference_tool_calls=reference)
    return checked(await metric(**options).score(s, {}))


FLIGHTS = [
    call("search_flights", destination="Paris", date="2024-01-15"),
    call("book_flight", flight_id="AF123", passenger="Ivan"),
]


# --- docs/metrics.md reference table ---------------------------------------------------------------------


@pytest.mark.parametrize("options", [{}, {"mode": "flexible"}, {"order": "strict"}])
async def test_identical_calls_score_1(options: dict[str, Any]) -> None:
    result = await score(FLIGHTS, list(FLIGHTS), **options)
    assert result.value == 1.0
    assert result.comment.startswith("2/2 reference calls matched")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"mode": "strict"}, 0.0),
        ({"mode": "flexible", "argument_match_threshold": 0.8}, 0.0),
        ({"mode": "flexible"}, 0.0),  # default threshold 0.8
        ({"mode": "flexible", "argument_match_threshold": 0.5}, 1.0),
    ],
)
async def test_one_argument_differs(options: dict[str, Any], expected: float) -> None:
    actual = [call("get_weather", city="Tokyo", units="celsius")]
    reference = [call("get_weather", city="Tokyo", units="fahrenheit")]
    assert (await score(actual, reference, **options)).value == expected


async def test_order_swapped() -> None:
    actual = [call("b", x=1), call("a", y=2)]
    reference = [call("a", y=2), call("b", x=1)]
    assert (await score(actual, reference, order="any")).value == 1.0
    assert (await score(actual, reference, order="strict")).value == 0.5


async def test_duplicate_call() -> None:
    result = await score([call("a", y=2), call("a", y=2)], [call("a", y=2)])
    assert result.value == pytest.approx(0.6667, abs=5e-5)
    assert result.details["precision"] == 0.5
    assert result.details["recall"] == 1.0
    assert result.details["unmatched_actual"] == [{"index": 1, "name": "a"}]


async def test_nothing_called() -> None:
    result = await score([], [call("a", y=2)])
    assert result.value == 0.0
    assert "no tool calls made" in result.comment


# --- edges -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("output", ["f1", "precision", "recall"])
async def test_both_empty_is_1(output: str) -> None:
    result = await score([], [], output=output)
    assert result.value == 1.0


@pytest.mark.parametrize("output", ["f1", "precision", "recall"])
async def test_one_empty_is_0(output: str) -> None:
    assert (await score([call("a")], [], output=output)).value == 0.0
    assert (await score([], [call("a")], output=output)).value == 0.0


def test_absent_reference_is_reported_missing_but_empty_is_not() -> None:
    m = metric()
    assert m.missing_inputs(sample(tool_calls=[call("a")])) == ["reference_tool_calls"]
    assert m.missing_inputs(sample(reference_tool_calls=[])) == ["tool_calls"]
    assert m.missing_inputs(sample(tool_calls=[], reference_tool_calls=[])) == []


async def test_output_precision_and_recall() -> None:
    actual = [call("a", y=1), call("b"), call("c")]
    reference = [call("a", y=1), call("b")]
    assert (await score(actual, reference, output="precision")).value == pytest.approx(2 / 3)
    assert (await score(actual, reference, output="recall")).value == 1.0
    assert (await score(actual, reference)).value == pytest.approx(0.8)


async def test_strict_mode_extra_or_missing_argument_fails() -> None:
    assert (await score([call("a", x=1, extra=2)], [call("a", x=1)])).value == 0.0
    assert (await score([call("a")], [call("a", x=1)])).value == 0.0


async def test_flexible_extra_arguments_do_not_count_against() -> None:
    result = await score([call("a", x=1, extra=2)], [call("a", x=1)], mode="flexible")
    assert result.value == 1.0


async def test_flexible_reference_without_arguments_has_share_1() -> None:
    result = await score([call("a", x=1)], [call("a")], mode="flexible", argument_match_threshold=1.0)
    assert result.value == 1.0
    assert result.details["matches"][0]["argument_share"] == 1.0


async def test_names_must_be_equal() -> None:
    assert (await score([call("get_weather", city="x")], [call("get_wether", city="x")])).value == 0.0


async def test_numbers_and_booleans_follow_json_equality() -> None:
    assert (await score([call("a", n=1.0)], [call("a", n=1)])).value == 1.0
    assert (await score([call("a", flag=1)], [call("a", flag=True)])).value == 0.0


async def test_coerce_and_casefold_options() -> None:
    actual = [call("book", seats="2", city="PARIS")]
    reference = [call("book", seats=2, city="Paris")]
    assert (await score(actual, reference)).value == 0.0
    assert (await score(actual, reference, coerce_scalars=True)).value == 0.0
    assert (await score(actual, reference, casefold_strings=True)).value == 0.0
    assert (await score(actual, reference, coerce_scalars=True, casefold_strings=True)).value == 1.0


async def test_unicode_names_and_arguments() -> None:
    calls = [
        call("поиск_рейсов", откуда="Москва", куда="Петербург", дата="2024-01-15"),
        call("бронирование_рейса", номер_рейса="СВ123", пассажиров=1),
    ]
    same = [ToolCall.model_validate(c.model_dump()) for c in calls]
    assert (await score(calls, same)).value == 1.0
    other = [calls[0], call("бронирование_рейса", номер_рейса="СВ124", пассажиров=1)]
    assert (await score(calls, other)).value == 0.5


# --- optimal matching, order independence ----------------------------------------------------------


async def test_optimal_matching_beats_greedy_first_fit() -> None:
    # Greedy first-fit pairs actual[0] with reference[0] (a match), and then actual[1] matches nothing
    # left: TP 1. The optimal matching pairs actual[0]–reference[1], actual[1]–reference[0]: TP 2.
    actual = [call("a", x=1, y=2), call("a", x=1)]
    reference = [call("a", x=1), call("a", x=1, y=2)]
    result = await score(actual, reference, mode="flexible", argument_match_threshold=0.8)
    assert result.value == 1.0
    pairs = {(m["actual"], m["reference"]) for m in result.details["matches"]}
    assert pairs == {(0, 1), (1, 0)}


async def test_value_does_not_depend_on_list_order() -> None:
    actual = [call("a", x=1, y=2), call("a", x=1), call("b", q="z"), call("a", x=2, y=2)]
    reference = [call("a", x=1), call("a", x=1, y=2), call("b", q="z"), call("a", x=3, y=2)]
    values = {
        round((await score(list(pa), list(pr), mode="flexible", argument_match_threshold=0.5)).value, 12)
        for pa in itertools.permutations(actual)
        for pr in itertools.permutations(reference)
    }
    assert values == {1.0}


async def test_details_prefer_best_fitting_pairs_among_maximum_matchings() -> None:
    actual = [call("a", x=1, y=9), call("a", x=1, y=2)]
    reference = [call("a", x=1, y=2)]
    result = await score(actual, reference, mode="flexible", argument_match_threshold=0.5)
    assert result.details["matches"] == [{"actual": 1, "reference": 0, "name": "a", "argument_share": 1.0}]


async def test_strict_order_is_lcs_under_the_match_relation() -> None:
    actual = [call("a"), call("c"), call("b"), call("d")]
    reference = [call("a"), call("b"), call("c"), call("d")]
    result = await score(actual, reference, order="strict")
    assert result.details["tp"] == 3
    assert result.value == 0.75
    assert "in order" in result.comment


async def test_details_name_matches_and_unmatched_calls() -> None:
    actual = [call("search", q="x"), call("book", id=1)]
    reference = [call("search", q="x"), call("pay", amount=5)]
    result = await score(actual, reference)
    assert result.details["matches"] == [{"actual": 0, "reference": 0, "name": "search"}]
    assert result.details["unmatched_reference"] == [{"index": 1, "name": "pay"}]
    assert result.details["unmatched_actual"] == [{"index": 1, "name": "book"}]
    assert (
        result.comment
        == "1/2 reference calls matched (precision 0.50, recall 0.50); missing: pay; extra: book"
    )


async def test_flexible_details_show_mismatched_arguments() -> None:
    actual = [call("get_weather", city="Tokyo", units="celsius")]
    reference = [call("get_weather", city="Tokyo", units="fahrenheit")]
    result = await score(actual, reference, mode="flexible", argument_match_threshold=0.5)
    assert result.details["matches"][0]["mismatched_arguments"] == ["units"]


# --- options ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "fuzzy"}, "mode"),
        ({"order": "sorted"}, "order"),
        ({"output": "f2"}, "output"),
        ({"mode": "flexible", "argument_match_threshold": 1.5}, "argument_match_threshold"),
        ({"mode": "flexible", "argument_match_threshold": -0.1}, "argument_match_threshold"),
        ({"argument_match_threshold": 0.5}, "only with mode = 'flexible'"),
        ({"treshold": 0.5}, "treshold"),
    ],
)
def test_invalid_options_are_rejected(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolCallAccuracyOptions.model_validate(options)


def test_registered_under_its_key() -> None:
    cls = default_registry().get("tool_call_accuracy")
    assert cls is ToolCallAccuracy
    assert cls.requires == ("tool_calls", "reference_tool_calls")
    assert cls.deterministic()


def _brute_force_tp(actual: list[ToolCall], reference: list[ToolCall], threshold: float) -> int:
    def matches(a: ToolCall, r: ToolCall) -> bool:
        if a.name != r.name:
            return False
        if not r.arguments:
            return True
        hits = sum(1 for k, v in r.arguments.items() if k in a.arguments and a.arguments[k] == v)
        return hits / len(r.arguments) >= threshold

    best = 0
    small, large, flip = (
        (actual, reference, False) if len(actual) <= len(reference) else (reference, actual, True)
    )
    for perm in itertools.permutations(range(len(large)), len(small)):
        tp = sum(
            1
            for i, j in enumerate(perm)
            if (matches(large[j], small[i]) if flip else matches(small[i], large[j]))
        )
        best = max(best, tp)
    return best


calls_strategy = st.lists(
    st.builds(
        lambda name, args: ToolCall(name=name, arguments=args),
        st.sampled_from(["a", "b"]),
        st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 1), max_size=3),
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(calls_strategy, calls_strategy, st.sampled_from([0.5, 0.6, 1.0]), st.randoms(use_true_random=False))
def test_flexible_tp_is_the_maximum_matching_whatever_the_order(
    actual: list[ToolCall], reference: list[ToolCall], threshold: float, rnd: Any
) -> None:
    m = metric(mode="flexible", argument_match_threshold=threshold)
    result = m.compute(actual, reference)
    if actual and reference:
        assert result.details["tp"] == _brute_force_tp(actual, reference, threshold)
    shuffled_a, shuffled_r = list(actual), list(reference)
    rnd.shuffle(shuffled_a)
    rnd.shuffle(shuffled_r)
    assert m.compute(shuffled_a, shuffled_r).value == pytest.approx(result.value)


@settings(max_examples=200, deadline=None)
@given(
    calls_strategy,
    calls_strategy,
    st.sampled_from([{}, {"mode": "flexible"}, {"order": "strict"}, {"output": "recall"}]),
)
def test_without_explaining_the_value_is_the_same_and_nothing_else_is_built(
    actual: list[ToolCall], reference: list[ToolCall], options: dict[str, Any]
) -> None:
    explained = metric(**options).compute(actual, reference)
    quiet = metric(**options)
    quiet.explain = False  # what `score`'s JSON lines and table run with: they show neither
    assert quiet.compute(actual, reference) == Score(explained.value)
    assert explained.comment and explained.details  # the worker's default: it posts both

"""ToolCorrectness: the four components, weights, renormalisation, overrides from the sample."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.support.metrics import call, checked, sample
from trace_scorer.metrics.base import Score, Skipped
from trace_scorer.metrics.registry import default_registry
from trace_scorer.metrics.tool_correctness import ToolCorrectness, ToolCorrectnessOptions
from trace_scorer.sample import Message, Sample


def metric(**options: Any) -> ToolCorrectness:
    return ToolCorrectness("tool_correctness", ToolCorrectnessOptions.model_validate(options))


async def score(s: Sample, **options: Any) -> Score:
    return checked(await metric(**options).score(s, {}))


def components(result: Score) -> dict[str, Any]:
    comps: dict[str, Any] = result.details["components"]
    assert set(comps) == {"selection", "parameters", "sequence", "utilization"}
    return comps


USER = [Message(role="user", content="What's the weather in Tokyo?")]


async def test_both_lists_empty_is_1_with_all_components_in_details() -> None:
    result = await score(sample(tool_calls=[], reference_tool_calls=[]))
    assert result.value == 1.0
    assert all(not c["included"] for c in components(result).values())


async def test_perfect_run_without_sequence_requirement() -> None:
    weather = call("get_weather", result={"temperature": 22, "condition": "sunny"}, city="Tokyo")
    s = sample(
        messages=USER,
        tool_calls=[weather],
        reference_tool_calls=[call("get_weather", city="Tokyo")],
        response="It is 22 degrees and sunny in Tokyo.",
    )
    result = await score(s)
    assert result.value == 1.0
    comps = components(result)
    assert comps["sequence"] == {
        "value": None,
        "weight": 0.25,
        "included": False,
        "reason": "sequence_matters is false",
    }
    assert comps["utilization"]["value"] == 1.0
    assert result.comment == (
        "selection 1.00, parameters 1.00, utilization 1.00; left out: sequence (sequence_matters is false)"
    )


async def test_selection_is_f1_of_name_multisets() -> None:
    s = sample(
        tool_calls=[call("a"), call("b"), call("b")],
        reference_tool_calls=[call("a"), call("b"), call("c")],
    )
    result = await score(s, weights={"selection": 1})
    sel = components(result)["selection"]
    assert sel["value"] == pytest.approx(2 / 3)
    assert sel["missing"] == ["c"]
    assert sel["extra"] == ["b"]
    assert result.value == pytest.approx(2 / 3)


async def test_parameters_share_per_reference_call() -> None:
    s = sample(
        tool_calls=[call("get_weather", city="Tokyo", units="celsius")],
        reference_tool_calls=[call("get_weather", city="Tokyo", units="fahrenheit"), call("notify")],
    )
    result = await score(s, weights={"parameters": 1})
    params = components(result)["parameters"]
    assert params["value"] == pytest.approx(0.25)  # (0.5 + unpaired 0) / 2
    assert params["pairs"][0]["mismatched_arguments"] == ["units"]
    assert params["unpaired_reference"] == [{"index": 1, "name": "notify"}]


async def test_parameters_use_the_optimal_assignment_not_greedy() -> None:
    # Greedy (reference 0 takes the first best actual, a tie at 0.5) leaves reference 1 with a share
    # of 0: mean 0.25. The optimal assignment: reference 0 ↔ actual 1 (0.5), reference 1 ↔ actual 0
    # (1.0): mean 0.75.
    s = sample(
        tool_calls=[call("a", p=1, q=3), call("a", p=9, q=2)],
        reference_tool_calls=[call("a", p=1, q=2), call("a", p=1, q=3)],
    )
    result = await score(s, weights={"parameters": 1})
    assert result.value == pytest.approx(0.75)


async def test_parameters_left_out_without_reference_calls() -> None:
    s = sample(tool_calls=[call("a")], reference_tool_calls=[])
    result = await score(s)
    comps = components(result)
    assert comps["parameters"]["included"] is False
    assert comps["parameters"]["reason"] == "no reference calls"
    assert result.value == 0.0  # selection 0, the rest left out


async def test_parameters_follow_argument_options() -> None:
    s = sample(tool_calls=[call("a", n="2", c="PARIS")], reference_tool_calls=[call("a", n=2, c="Paris")])
    assert (await score(s, weights={"parameters": 1})).value == 0.0
    both = {"coerce_scalars": True, "casefold_strings": True}
    assert (await score(s, weights={"parameters": 1}, **both)).value == 1.0


async def test_sequence_osa_distance() -> None:
    s = sample(
        tool_calls=[call("b"), call("a"), call("c")],
        reference_tool_calls=[call("a"), call("b"), call("c")],
    )
    result = await score(s, weights={"sequence": 1}, sequence_matters=True)
    seq = components(result)["sequence"]
    assert seq["distance"] == 1  # one adjacent transposition
    assert result.value == pytest.approx(2 / 3)


async def test_sequence_with_missing_call() -> None:
    s = sample(tool_calls=[call("a")], reference_tool_calls=[call("a"), call("b"), call("c"), call("d")])
    result = await score(s, weights={"sequence": 1}, sequence_matters=True)
    assert result.value == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("option", "flag", "included"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
async def test_sample_flag_overrides_sequence_option(option: bool, flag: bool | None, included: bool) -> None:
    s = sample(
        tool_calls=[call("b"), call("a")],
        reference_tool_calls=[call("a"), call("b")],
        tool_sequence_matters=flag,
    )
    result = await score(s, sequence_matters=option)
    assert components(result)["sequence"]["included"] is included
    if flag is False:
        assert components(result)["sequence"]["reason"] == "the sample's tool_sequence_matters is false"
    # selection 1, parameters 1, sequence 1 - 1/2 (one adjacent transposition)
    assert result.value == (pytest.approx(2.5 / 3) if included else 1.0)


async def test_utilization_flag_wins_over_tokens() -> None:
    weather = call("get_weather", result={"temperature": 22}, city="Tokyo")
    base = {"messages": USER, "tool_calls": [weather], "reference_tool_calls": [weather]}
    used_by_tokens = sample(**base, response="It is 22 degrees.")
    assert (await score(used_by_tokens, weights={"utilization": 1})).value == 1.0
    flagged_no = sample(**base, response="It is 22 degrees.", final_answer_uses_tools=False)
    result = await score(flagged_no, weights={"utilization": 1})
    assert result.value == 0.0
    assert components(result)["utilization"]["source"] == "final_answer_uses_tools"
    flagged_yes = sample(**base, response="No idea.", final_answer_uses_tools=True)
    assert (await score(flagged_yes, weights={"utilization": 1})).value == 1.0


async def test_utilization_ignores_tokens_echoed_from_the_user_and_json_keys() -> None:
    result_ = {"city": "Tokyo", "temperature": 31}
    weather = call("get_weather", result=result_, city="Tokyo")
    s = sample(
        messages=USER,
        tool_calls=[weather],
        reference_tool_calls=[weather],
        response="Here is the current temperature in Tokyo.",  # "tokyo": user's; "temperature": a key
    )
    result = await score(s, weights={"utilization": 1})
    assert result.value == 0.0
    assert components(result)["utilization"]["results_checked"] == 1


async def test_utilization_share_over_results_with_salient_tokens() -> None:
    calls = [
        call("search_flights", result='[{"flight_id": "AF123", "price": 420}]', destination="Paris"),
        call("get_hotel", result="Hotel Lutetia, 250 EUR per night", city="Paris"),
        call("send_email", result="ok"),  # nothing salient: cannot show use, not counted
        call("noop", result=""),  # empty: not a result
    ]
    s = sample(
        messages=[Message(role="user", content="Find me a flight to Paris")],
        tool_calls=calls,
        reference_tool_calls=calls,
        response="Flight AF123 costs 420 euros.",
    )
    result = await score(s, weights={"utilization": 1})
    util = components(result)["utilization"]
    assert (util["results_used"], util["results_checked"]) == (1, 2)
    assert result.value == 0.5


async def test_utilization_falls_back_to_tool_messages() -> None:
    s = sample(
        messages=[
            *USER,
            Message(role="tool", content="Temperature: 17 degrees, drizzle", tool_call_id="c1"),
        ],
        tool_calls=[call("get_weather", city="Tokyo")],
        reference_tool_calls=[call("get_weather", city="Tokyo")],
        response="Expect drizzle today.",
    )
    result = await score(s, weights={"utilization": 1})
    assert result.value == 1.0
    assert components(result)["utilization"]["source"] == "tool messages"


async def test_utilization_works_for_russian_and_cjk() -> None:
    ru = call("погода", result={"описание": "Облачно, +5"}, город="Москва")
    s = sample(
        messages=[Message(role="user", content="Какая погода в Москве?")],
        tool_calls=[ru],
        reference_tool_calls=[ru],
        response="Сейчас облачно.",
    )
    assert (await score(s, weights={"utilization": 1})).value == 1.0
    zh = call("weather", result={"天气": "北京今天晴朗"}, city="北京")
    s = sample(
        messages=[Message(role="user", content="北京天气怎么样?")],
        tool_calls=[zh],
        reference_tool_calls=[zh],
        response="根据查询,北京今天晴朗。",
    )
    assert (await score(s, weights={"utilization": 1})).value == 1.0


async def test_utilization_left_out_without_results_and_weights_renormalised() -> None:
    s = sample(
        tool_calls=[call("a", x=1), call("b", y=1)],
        reference_tool_calls=[call("a", x=1), call("b", y=2)],
        response="Done.",
    )
    result = await score(s)
    comps = components(result)
    assert comps["utilization"]["reason"] == "no tool results"
    assert result.value == pytest.approx((1.0 + 0.5) / 2)  # selection and parameters, renormalised


async def test_empty_response_uses_nothing() -> None:
    weather = call("get_weather", result={"temperature": 22}, city="Tokyo")
    s = sample(messages=USER, tool_calls=[weather], reference_tool_calls=[weather], response="")
    assert (await score(s, weights={"utilization": 1})).value == 0.0


async def test_custom_weights() -> None:
    s = sample(
        tool_calls=[call("a", x=1), call("c")],
        reference_tool_calls=[call("a", x=2), call("b")],
    )
    # selection 0.5, parameters 0 (a: share 0; b: unpaired)
    result = await score(s, weights={"selection": 3, "parameters": 1})
    assert result.value == pytest.approx(3 * 0.5 / 4)
    comps = components(result)
    assert comps["sequence"]["weight"] == 0.0
    assert comps["utilization"]["weight"] == 0.0


async def test_skipped_when_every_weighted_component_is_left_out() -> None:
    s = sample(tool_calls=[call("a")], reference_tool_calls=[call("a")])
    outcome = await metric(weights={"sequence": 1}).score(s, {})
    assert isinstance(outcome, Skipped)
    assert "sequence" in outcome.reason


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"selection": 1, "speed": 1}, "unknown component"),
        ({"selection": -0.1}, "≥ 0"),
        ({"selection": 0, "parameters": 0}, "greater than 0"),
        ({}, "greater than 0"),
        ({"selection": True}, "must be a number"),
        ({"selection": float("nan")}, "finite"),
        ({"selection": "high"}, "must be a number"),
    ],
)
def test_invalid_weights_are_rejected(weights: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolCorrectnessOptions.model_validate({"weights": weights})


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ValidationError, match="sequence_matter"):
        ToolCorrectnessOptions.model_validate({"sequence_matter": True})


def test_registered_and_requires_both_call_lists() -> None:
    assert default_registry().get("tool_correctness") is ToolCorrectness
    m = metric()
    assert m.missing_inputs(sample(tool_calls=[])) == ["reference_tool_calls"]
    assert m.missing_inputs(sample(tool_calls=[], reference_tool_calls=[])) == []


async def test_docs_example() -> None:
    weather = call(
        "get_weather", result={"temperature": 22, "condition": "sunny"}, city="Tokyo", units="celsius"
    )
    s = sample(
        messages=USER,
        tool_calls=[weather],
        reference_tool_calls=[call("get_weather", city="Tokyo", units="fahrenheit")],
        response="It is 22 degrees and sunny.",
    )
    result = await score(s)
    assert result.value == pytest.approx(2.5 / 3)
    assert result.comment == (
        "selection 1.00, parameters 0.50, utilization 1.00; left out: sequence (sequence_matters is false)"
    )

"""scope = "observation": the observation filter (langfuse/reads/observation_filter.py) and the samples built
from one trace's rows, one per matching observation (extract/observations.py), hostile rows included."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from trace_scorer.config.targets import TargetSettings
from trace_scorer.data.patterns import SafePattern
from trace_scorer.extract.observations import MAX_SUBTREE_ROWS, observation_samples
from trace_scorer.langfuse.reads.observation_filter import ObservationFilter
from trace_scorer.metrics.base import Resources, Score, Skipped
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan
from trace_scorer.worker.observations import observation_filter

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}]


def row(ident: str, kind: str, *, parent: str | None = "root", second: int = 0, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": ident,
        "traceId": "t1",
        "type": kind,
        "name": fields.pop("name", ident),
        "parentObservationId": parent,
        "startTime": f"2026-03-02T09:00:{second:02d}.000Z",
        "endTime": f"2026-03-02T09:00:{second:02d}.900Z",
        "level": fields.pop("level", "DEFAULT"),
        "metadata": fields.pop("metadata", {}),
    }
    for key in ("input", "output"):
        if key in fields:
            base[key] = json.dumps(fields.pop(key))
    base.update(fields)
    return base


def openai_wrapper_trace() -> list[dict[str, Any]]:
    """An agent traced with the openai wrapper: a generation asking for a call, the tool, the answer."""
    question = [{"role": "user", "content": "Weather in Oslo?"}]
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    return [
        row("root", "AGENT", parent=None, input="Weather in Oslo?", output="It is 4 °C.", second=0),
        row(
            "g1",
            "GENERATION",
            second=1,
            input={"messages": question, "tools": TOOLS},
            output={"role": "assistant", "content": None, "tool_calls": [call]},
        ),
        row("t1", "TOOL", name="get_weather", second=2, input={"city": "Oslo"}, output={"temp": 4}),
        row(
            "g2",
            "GENERATION",
            second=3,
            input={"messages": question, "tools": TOOLS},
            output={"role": "assistant", "content": "It is 4 °C."},
        ),
    ]


def everything(**kwargs: Any) -> ObservationFilter:
    return ObservationFilter(types=(), **kwargs)


# -- the filter ---------------------------------------------------------------------------------------


def test_the_default_filter_takes_generations_only() -> None:
    f = ObservationFilter()
    kinds = {r["id"]: f.matches(r) for r in openai_wrapper_trace()}
    assert kinds == {"root": False, "g1": True, "t1": False, "g2": True}


def test_name_pattern_level_and_metadata_must_all_hold() -> None:
    f = ObservationFilter(
        types=("TOOL",), name_pattern=SafePattern("^get_"), levels=("ERROR",), metadata={"tenant.id": "acme"}
    )
    good = row("t", "TOOL", name="get_weather", level="ERROR", metadata={"tenant.id": "acme"})
    assert f.matches(good)
    assert not f.matches({**good, "name": "fetch_weather"})
    assert not f.matches({**good, "level": "DEFAULT"})
    assert not f.matches({**good, "metadata": {"tenant.id": "globex"}})
    assert not f.matches({**good, "type": "GENERATION"})
    # metadata nested (legacy) or nested as JSON text is read too
    assert f.matches({**good, "metadata": {"tenant": {"id": "acme"}}})
    assert f.matches({**good, "metadata": {"tenant": '{"id": "acme"}'}})


def test_an_absent_level_is_default_and_types_are_case_insensitive() -> None:
    f = ObservationFilter(types=("GENERATION",), levels=("DEFAULT",))
    bare = {"id": "g", "type": "generation"}
    assert f.matches(bare)
    assert not ObservationFilter(levels=("ERROR",)).matches(bare)


@pytest.mark.parametrize(
    "hostile",
    [
        {"id": "x", "type": None, "name": "get_weather"},
        {"id": "x", "type": 7, "name": "get_weather"},
        {"id": "x", "type": "TOOL", "name": 12},
        {"id": "x", "type": "TOOL", "name": None},
        {"id": "x", "type": "TOOL", "name": "get_weather", "level": ["ERROR"]},
        {"id": "x", "type": "TOOL", "name": "get_weather", "metadata": "tenant.id=acme"},
        {"id": "x", "type": "TOOL", "name": "get_weather", "metadata": {"tenant.id": {"deep": "acme"}}},
    ],
)
def test_rows_of_the_wrong_shape_do_not_match_and_do_not_raise(hostile: dict[str, Any]) -> None:
    f = ObservationFilter(types=("TOOL",), name_pattern=SafePattern("weather"), metadata={"tenant.id": "acme"})
    assert f.matches(hostile) is False


def test_the_server_is_asked_to_filter_only_for_types_without_children() -> None:
    assert ObservationFilter(types=("GENERATION",)).leaves_only
    assert ObservationFilter(types=("GENERATION", "EVENT"), levels=("ERROR",)).v4_conditions() == [
        {"type": "stringOptions", "column": "type", "operator": "any of", "value": ["GENERATION", "EVENT"]},
        {"type": "stringOptions", "column": "level", "operator": "any of", "value": ["ERROR"]},
    ]
    assert not ObservationFilter(types=("AGENT",)).leaves_only  # its sample holds its descendants
    assert not ObservationFilter(types=("GENERATION", "TOOL")).leaves_only
    assert not everything().leaves_only  # no type: every row is a candidate


def test_the_target_settings_become_the_filter() -> None:
    target = TargetSettings.model_validate(
        {
            "name": "gens",
            "scope": "observation",
            "observations": {"types": ["TOOL", "TOOL"], "name_pattern": "^search", "levels": ["ERROR"]},
            "metrics": [{"metric": "tool_errors"}],
        }
    )
    f = observation_filter(target)
    assert f.types == ("TOOL",) and f.levels == ("ERROR",)
    assert f.matches(row("t", "TOOL", name="search_web", level="ERROR"))
    assert not f.matches(row("t", "TOOL", name="web_search", level="ERROR"))


def test_a_backtracking_name_pattern_is_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="name_pattern"):
        TargetSettings.model_validate(
            {"name": "x", "scope": "observation", "observations": {"name_pattern": r"(a)\1"}, "metrics": ["rouge"]}
        )


# -- the samples --------------------------------------------------------------------------------------


def test_each_generation_is_a_sample_with_its_messages_calls_tools_and_answer() -> None:
    samples = observation_samples(openai_wrapper_trace(), ObservationFilter().matches, trace_id="t1")
    assert [s.id for s in samples] == ["g1", "g2"]
    first, last = samples
    assert first.trace_id == "t1" and first.observation_id == "g1"
    # the conversation up to it, and its own turn (a call, no text)
    assert [(m.role, m.content) for m in first.messages or []] == [("user", "Weather in Oslo?"), ("assistant", "")]
    assert [(c.name, c.arguments) for c in first.tool_calls or []] == [("get_weather", {"city": "Oslo"})]
    assert [t.name for t in first.tools or []] == ["get_weather"]
    assert first.response == ""  # it ended on a call: no answer in this observation
    assert last.response == "It is 4 °C."
    assert last.tool_calls == []  # this generation asked for no call
    assert first.latency == pytest.approx(0.9)


def test_an_agent_sample_holds_what_was_done_under_it() -> None:
    rows = [
        row("root", "CHAIN", parent=None, input="q", output="a", second=0),
        row("agent", "AGENT", second=1, input="q", output="done"),
        row("t1", "TOOL", parent="agent", name="get_weather", second=2, input={"city": "Oslo"}, output={"t": 4}),
        row("t2", "TOOL", parent="agent", name="get_weather", second=3, input={"city": "Rome"}, output={"t": 9}),
        row("other", "TOOL", name="log", second=4, input={}, output={}),  # beside the agent, not under it
    ]
    (sample,) = observation_samples(rows, ObservationFilter(types=("AGENT",)).matches, trace_id="t1")
    assert sample.id == "agent"
    assert [c.arguments["city"] for c in sample.tool_calls or []] == ["Oslo", "Rome"]
    assert sample.response == "done"


def test_a_tool_sample_is_validated_against_the_tools_of_the_generation_before_it() -> None:
    rows = openai_wrapper_trace()
    rows[2]["level"] = "ERROR"
    rows[2]["statusMessage"] = "upstream timeout"
    (tool,) = observation_samples(rows, ObservationFilter(types=("TOOL",)).matches, trace_id="t1")
    assert [t.name for t in tool.tools or []] == ["get_weather"]
    plan = build_plan(
        TargetSettings.model_validate(
            {"name": "tools", "metrics": [{"metric": "tool_errors"}, {"metric": "tool_call_validity"}]}
        ),
        index=0,
        resources=Resources(),
    )
    result = asyncio.run(Pipeline(plan).score_sample(tool))
    errors, validity = result.outcomes["tool_errors"], result.outcomes["tool_call_validity"]
    assert isinstance(errors, Score) and errors.value == 1.0  # its one execution failed
    assert isinstance(validity, Score) and validity.value == 1.0


def test_reference_free_metrics_score_each_generation() -> None:
    plan = build_plan(
        TargetSettings.model_validate(
            {"name": "gens", "metrics": [{"metric": "tool_call_validity"}, {"metric": "answer_completeness"}]}
        ),
        index=0,
        resources=Resources(),
    )
    rows = openai_wrapper_trace()
    bad = json.loads(rows[1]["output"])
    bad["tool_calls"][0]["function"]["arguments"] = '{"town": "Oslo"}'  # misses the required "city"
    rows[1]["output"] = json.dumps(bad)
    samples = observation_samples(rows, ObservationFilter().matches, trace_id="t1")
    results = [asyncio.run(Pipeline(plan).score_sample(s)) for s in samples]
    validity = [r.outcomes["tool_call_validity"] for r in results]
    assert isinstance(validity[0], Score) and validity[0].value == 0.0
    assert isinstance(validity[1], Skipped)  # no call made: nothing to validate
    complete = [r.outcomes["answer_completeness"] for r in results]
    assert isinstance(complete[1], Score) and complete[1].value == 1.0


def test_rows_of_other_traces_non_objects_and_rows_without_id_are_left_out() -> None:
    rows: list[Any] = [
        *openai_wrapper_trace(),
        {**openai_wrapper_trace()[1], "traceId": "t2", "id": "foreign"},
        "not a row",
        None,
        {"type": "GENERATION", "traceId": "t1"},
        {"id": "", "type": "GENERATION", "traceId": "t1"},
    ]
    samples = observation_samples(rows, ObservationFilter().matches, trace_id="t1")
    assert [s.id for s in samples] == ["g1", "g2"]


def test_a_row_seen_twice_is_one_sample_its_newest_version() -> None:
    rows = openai_wrapper_trace()
    old = json.dumps({"role": "assistant", "content": "old"})
    stale = {**rows[3], "output": old, "updatedAt": "2026-03-02T09:00:05Z"}
    fresh = {**rows[3], "updatedAt": "2026-03-02T09:00:09Z"}
    samples = observation_samples([*rows[:3], fresh, stale], ObservationFilter().matches, trace_id="t1")
    assert [s.id for s in samples] == ["g1", "g2"]
    assert samples[1].response == "It is 4 °C."


def test_a_parent_cycle_neither_loops_nor_duplicates() -> None:
    rows = [
        row("a", "AGENT", parent="b", second=1, input="q", output="x"),
        row("b", "AGENT", parent="a", second=2, input="q", output="y"),
        row("c", "TOOL", parent="c", name="get_weather", second=3, input={"city": "Oslo"}, output={}),
    ]
    samples = observation_samples(rows, everything().matches, trace_id="t1")
    assert [s.id for s in samples] == ["a", "b", "c"]
    assert [c.name for c in samples[0].tool_calls or []] == []  # b holds no tool, c is its own parent


def test_hostile_payloads_become_notes_not_errors() -> None:
    rows = openai_wrapper_trace()
    rows[1]["output"] = '{"a":' * 5000 + "1" + "}" * 5000  # nested deeper than any reader goes
    rows[3]["input"] = json.dumps({"messages": "not a list", "tools": 42})
    rows[3]["name"] = {"$gt": ""}
    samples = observation_samples(rows, ObservationFilter().matches, trace_id="t1")
    assert [s.id for s in samples] == ["g1", "g2"]
    assert isinstance(samples[0].response, str)  # too deep to parse: kept as the text it is
    assert any("not in a message format" in note for note in samples[1].notes)
    assert samples[1].response == "It is 4 °C."


def test_a_huge_subtree_is_cut_with_a_note() -> None:
    rows = [row("agent", "AGENT", parent=None, input="q", output="a")]
    rows += [row(f"s{i}", "SPAN", parent="agent") for i in range(MAX_SUBTREE_ROWS + 5)]
    (sample,) = observation_samples(rows, ObservationFilter(types=("AGENT",)).matches, trace_id="t1")
    assert any("cut at" in note for note in sample.notes)


def test_no_matching_observation_gives_no_sample() -> None:
    assert observation_samples(openai_wrapper_trace(), ObservationFilter(types=("EVENT",)).matches, trace_id="t1") == []
    assert observation_samples([], ObservationFilter().matches, trace_id="t1") == []


def test_a_generation_s_calls_are_those_it_asked_for_not_its_history_s() -> None:
    earlier = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    now = {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
    history = [
        {"role": "user", "content": "Oslo, then Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [earlier]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 4}'},
    ]
    rows = [
        row("root", "AGENT", parent=None, input="q", output="a"),
        row(
            "g",
            "GENERATION",
            second=1,
            input={"messages": history, "tools": TOOLS},
            output={"role": "assistant", "content": None, "tool_calls": [now]},
        ),
    ]
    (sample,) = observation_samples(rows, ObservationFilter().matches, trace_id="t1")
    assert [c.arguments for c in sample.tool_calls or []] == [{"city": "Rome"}]
    assert [m.role for m in sample.messages or []] == ["user", "assistant", "tool", "assistant"]


def test_an_exact_name_is_asked_of_the_server_other_patterns_are_not() -> None:
    exact = ObservationFilter(types=("GENERATION",), name_pattern=SafePattern("^ChatOpenAI$"))
    assert {"type": "string", "column": "name", "operator": "=", "value": "ChatOpenAI"} in exact.v4_conditions()
    for pattern in ("ChatOpenAI", "^Chat.*$", "^a|b$", r"^a\.b$"):
        loose = ObservationFilter(types=("GENERATION",), name_pattern=SafePattern(pattern))
        assert all(c["column"] != "name" for c in loose.v4_conditions()), pattern


def test_a_generation_that_declared_no_tools_borrows_none() -> None:
    rows = openai_wrapper_trace()
    second = json.loads(rows[3]["input"])
    del second["tools"]
    rows[3]["input"] = json.dumps(second)
    samples = observation_samples(rows, ObservationFilter().matches, trace_id="t1")
    assert [t.name for t in samples[0].tools or []] == ["get_weather"]
    assert samples[1].tools is None  # it offered the model no tool: nothing to validate against


# -- judge variables ------------------------------------------------------------------------------------


def test_judge_variables_read_the_scored_observation_and_the_trace_each_as_itself() -> None:
    """``$.observation`` is the generation scored; ``$.trace`` the trace (its root), not the observation."""
    from trace_scorer.config.references import ReferenceSettings

    paths = ["$.observation.id", "$.observation.output.content", "$.trace.input", "$.trace.output", "$.trace.id"]
    references = ReferenceSettings(variables=paths)
    by_id = {
        s.id: s.variables
        for s in observation_samples(
            openai_wrapper_trace(), ObservationFilter().matches, trace_id="t1", references=references
        )
    }
    assert by_id["g2"]["$.observation.id"] == "g2"
    assert by_id["g2"]["$.observation.output.content"] == "It is 4 °C."
    assert by_id["g2"]["$.trace.input"] == "Weather in Oslo?"
    assert by_id["g2"]["$.trace.output"] == "It is 4 °C."
    assert by_id["g1"]["$.trace.input"] == "Weather in Oslo?"
    assert by_id["g1"]["$.trace.id"] == "t1"


def test_rows_narrowed_to_the_generations_read_the_trace_from_its_listed_root() -> None:
    """A v4 server asked for generations only sends no root: the worker passes the root row it listed;
    without it, ``$.trace`` holds only what the generation's row tells of its trace (no input)."""
    from trace_scorer.config.references import ReferenceSettings

    rows = openai_wrapper_trace()
    root, generations = rows[0], [r for r in rows if r["type"] == "GENERATION"]
    for r in generations:
        r["traceName"] = "weather-agent"
    references = ReferenceSettings(variables=["$.trace.input", "$.trace.name", "$.observation.id"])
    listed = observation_samples(
        generations, ObservationFilter().matches, trace_id="t1", references=references, trace_row=root
    )
    assert [s.variables["$.trace.input"] for s in listed] == ["Weather in Oslo?", "Weather in Oslo?"]
    alone = observation_samples(generations, ObservationFilter().matches, trace_id="t1", references=references)
    assert [s.variables.get("$.trace.input") for s in alone] == [None, None]
    assert [s.variables["$.trace.name"] for s in alone] == ["weather-agent", "weather-agent"]
    assert [s.variables["$.observation.id"] for s in alone] == ["g1", "g2"]


def test_an_evaluator_s_input_and_output_default_to_the_scored_observation() -> None:
    """Langfuse's observation evaluators read the observation's input and output: so do the defaults."""
    from trace_scorer.config.references import DEFAULT_VARIABLE_PATHS, ReferenceSettings

    paths = [*DEFAULT_VARIABLE_PATHS["input"], *DEFAULT_VARIABLE_PATHS["output"]]
    samples = observation_samples(
        openai_wrapper_trace(),
        ObservationFilter().matches,
        trace_id="t1",
        references=ReferenceSettings(variables=paths),
    )
    g2 = next(s for s in samples if s.id == "g2")
    first_input = next(p for p in DEFAULT_VARIABLE_PATHS["input"] if p in g2.variables)
    first_output = next(p for p in DEFAULT_VARIABLE_PATHS["output"] if p in g2.variables)
    assert g2.variables[first_input]["messages"][0]["content"] == "Weather in Oslo?"
    assert g2.variables[first_output]["content"] == "It is 4 °C."

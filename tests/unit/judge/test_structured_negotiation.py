"""Structured output negotiated per model against what real servers answer (docs/judges.md, "Structured
output"): each mode's request, the step-down on a refusal naming the parameter (400, 422 or 500), no retry
of such a refusal, the mode remembered, tool calls read, and the per-sample constraints in the schema."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.support.clocks import SleepRecorder
from tests.support.judge import (
    JudgeFactory,
    ScriptedLLM,
    booking_sample,
    completion,
    make_metric,
    provider,
    verdict,
)
from trace_scorer.judge.structured import MODES, REJECTION_WORDS
from trace_scorer.metrics.aspect_critic import AspectCritic
from trace_scorer.metrics.base import Score
from trace_scorer.metrics.topic_adherence import TopicAdherence

#: What llama-cpp-python 0.3.36's server answers to a ``json_schema`` response_format (seen on the real
#: server: a 500 carrying the request's validation error).
LLAMA_CPP_500 = {
    "error": {
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
        "type": "internal_server_error",
    }
}


def critic(judge: Any) -> AspectCritic:
    metric: AspectCritic = make_metric(AspectCritic, judge, "crit", definition="The answer is polite")
    return metric


def mode_of(body: dict[str, Any]) -> str:
    """Which mode a request was sent in, from its fields."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        if fmt["type"] == "json_schema":
            return "json_schema"
        return "json_object_schema" if "schema" in fmt else "json_object"
    for key, mode in (("structured_outputs", "vllm_structured"), ("format", "ollama_format"), ("tools", "tools")):
        if key in body:
            return mode
    return "none"


async def test_a_500_naming_response_format_steps_down_at_once_without_retrying(
    llm: ScriptedLLM, make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    def llama_cpp(body: dict[str, Any]) -> httpx.Response | str:
        if mode_of(body) == "json_schema":
            return httpx.Response(500, json=LLAMA_CPP_500)
        return verdict(1)

    llm.on("a", llama_cpp)
    judge = await make_judge(provider("p", "a"))
    outcome = await critic(judge).score(booking_sample(), {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    assert [mode_of(r) for r in llm.requests] == ["json_schema", "json_object_schema"]
    assert sleeps.waits == []  # no back-off: the 500 says the same every time
    schema = llm.requests[1]["response_format"]["schema"]
    assert schema["additionalProperties"] is False and schema["required"] == ["reasoning", "verdict"]


async def test_a_500_that_names_nothing_is_still_retried(
    llm: ScriptedLLM, make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    llm.on("a", httpx.Response(500, json={"error": {"message": "CUDA out of memory"}}), verdict(0))
    judge = await make_judge(provider("p", "a"))
    assert isinstance(await critic(judge).score(booking_sample(), {}), Score)
    assert [mode_of(r) for r in llm.requests] == ["json_schema", "json_schema"]
    assert len(sleeps.waits) == 1


async def test_every_mode_in_the_documented_order_down_to_the_prompt_alone(
    llm: ScriptedLLM, make_judge: JudgeFactory, sleeps: SleepRecorder
) -> None:
    def refuses_everything(body: dict[str, Any]) -> httpx.Response | str:
        mode = mode_of(body)
        if mode == "none":
            return "```json\n" + verdict(1) + "\n```"
        status = {"json_schema": 400, "json_object_schema": 422}.get(mode, 500)
        return httpx.Response(status, json={"error": {"message": f"unsupported: {REJECTION_WORDS[mode][0]}"}})

    llm.on("a", refuses_everything)
    judge = await make_judge(provider("p", "a"))
    assert isinstance(await critic(judge).score(booking_sample(), {}), Score)
    assert [mode_of(r) for r in llm.requests] == list(MODES)
    assert sleeps.waits == []
    assert judge.structured_mode("p/a") == "none"


async def test_each_mode_sends_the_schema_in_its_servers_form(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", verdict(1))
    for mode in MODES:
        judge = await make_judge(provider("p", "a", structured_output=mode))
        await critic(judge).score(booking_sample(id=mode), {})
    by_mode = {mode_of(r): r for r in llm.requests}
    assert set(by_mode) == set(MODES)
    assert by_mode["vllm_structured"]["structured_outputs"]["json"]["properties"]["verdict"]["enum"] == [0, 1]
    assert by_mode["ollama_format"]["format"]["required"] == ["reasoning", "verdict"]
    tool = by_mode["tools"]
    assert tool["tool_choice"] == {"type": "function", "function": {"name": "AspectVerdict"}}
    assert tool["tools"][0]["function"]["parameters"]["additionalProperties"] is False
    assert by_mode["json_object"]["response_format"] == {"type": "json_object"}
    assert not {"response_format", "tools", "format", "structured_outputs"} & set(by_mode["none"])


async def test_a_tool_call_answer_is_read_from_its_arguments(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    def tool_call(body: dict[str, Any]) -> httpx.Response:
        response = completion(None, model="a")
        payload = json.loads(response.content)
        payload["choices"][0]["finish_reason"] = "tool_calls"
        payload["choices"][0]["message"]["tool_calls"] = [
            {"id": "c1", "type": "function", "function": {"name": "AspectVerdict", "arguments": verdict(1)}}
        ]
        return httpx.Response(200, json=payload)

    llm.on("a", tool_call)
    judge = await make_judge(provider("p", "a", structured_output="tools"))
    outcome = await critic(judge).score(booking_sample(), {})
    assert isinstance(outcome, Score) and outcome.value == 1.0
    assert len(llm.requests) == 1


async def test_topic_adherence_sends_the_reference_topics_as_an_enum(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    topics = ["flight booking", "payments"]
    answer = {
        "topics": [{"topic": "flight booking", "on_topic": True}],
        "reference_topics": [{"topic": t, "covered": True} for t in topics],
    }
    llm.on("a", json.dumps(answer))
    judge = await make_judge(provider("p", "a", structured_output="json_object_schema"))
    metric = make_metric(TopicAdherence, judge, reference_topics=topics)
    assert isinstance(await metric.score(booking_sample(), {}), Score)
    schema = llm.requests[0]["response_format"]["schema"]
    assert "$defs" not in json.dumps(schema)  # inlined: the form grammar converters take
    listed = schema["properties"]["reference_topics"]
    assert listed["items"]["properties"]["topic"]["enum"] == topics
    assert listed["minItems"] == listed["maxItems"] == 2
    assert listed["items"]["additionalProperties"] is False
    assert listed["items"]["required"] == ["topic", "covered"]


async def test_requests_queued_behind_the_refused_one_go_out_in_the_mode_that_works(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    def llama_cpp(body: dict[str, Any]) -> httpx.Response | str:
        return httpx.Response(500, json=LLAMA_CPP_500) if mode_of(body) == "json_schema" else verdict(1)

    llm.on("a", llama_cpp)
    judge = await make_judge(provider("p", "a", max_concurrency=1))
    metric = critic(judge)
    outcomes = await asyncio.gather(
        *(metric.score(booking_sample(id=str(i), response=f"Answer {i}"), {}) for i in range(4))
    )
    assert all(isinstance(o, Score) for o in outcomes)
    # the mode is read when a request gets its turn: one refusal, not one per request asked for at once
    assert [mode_of(r) for r in llm.requests].count("json_schema") == 1
    assert len(llm.requests) == 5

"""The OpenAI stand-in's server profiles (standins/openai_server.py, docs/judges.md "The stand-in's
profiles") over real HTTP, and the judge negotiating with each: what each server takes, how it refuses the
rest, one-at-a-time queueing, and unknown models."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from standins.faults import FaultConfig
from tests.integration.standins.test_openai_standin import make_judge, metrics, samples
from tests.support.standins import StartOpenAI
from trace_scorer.metrics.base import Score

SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "verdict": {"enum": [0, 1], "type": "integer"}},
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}
ASK = {"model": "judge-a", "messages": [{"role": "user", "content": "Is the answer polite?"}]}


def post(url: str, **fields: Any) -> httpx.Response:
    with httpx.Client(base_url=url) as http:
        return http.post("/v1/chat/completions", json={**ASK, **fields})


def json_schema_format() -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "AspectVerdict", "schema": SCHEMA, "strict": True}}


def test_llama_cpp_refuses_json_schema_with_a_500_and_enforces_a_schema_in_json_mode(start_llm: StartOpenAI) -> None:
    llm = start_llm()  # the default profile: llama-cpp-python's server
    refused = post(llm.url, response_format=json_schema_format())
    assert refused.status_code == 500
    assert "response_format" in refused.text and "Input should be 'text' or 'json_object'" in refused.text
    answered = post(llm.url, response_format={"type": "json_object", "schema": SCHEMA})
    content = json.loads(answered.json()["choices"][0]["message"]["content"])
    assert set(content) == {"reasoning", "verdict"} and content["verdict"] in (0, 1)


def test_llama_cpp_serves_an_unknown_model_with_its_default_and_echoes_the_name(start_llm: StartOpenAI) -> None:
    llm = start_llm(models=["smollm2"])
    answer = post(llm.url, model="no-such-model")
    assert answer.status_code == 200 and answer.json()["model"] == "no-such-model"


def test_openai_refuses_what_it_does_not_know_with_a_400_naming_it(start_llm: StartOpenAI) -> None:
    llm = start_llm(profile="openai", models=["gpt-4o-mini"])
    schema_in_json_mode = post(llm.url, model="gpt-4o-mini", response_format={"type": "json_object", "schema": SCHEMA})
    vllm_field = post(llm.url, model="gpt-4o-mini", structured_outputs={"json": SCHEMA})
    unknown = post(llm.url, model="gpt-4o-mini-typo")
    assert [r.status_code for r in (schema_in_json_mode, vllm_field, unknown)] == [400, 400, 404]
    assert "response_format.schema" in schema_in_json_mode.text and "structured_outputs" in vllm_field.text
    assert "gpt-4o-mini-typo" in unknown.json()["error"]["message"]


def test_vllm_enforces_structured_outputs(start_llm: StartOpenAI) -> None:
    llm = start_llm(profile="vllm")
    answer = post(llm.url, structured_outputs={"json": SCHEMA})
    assert set(json.loads(answer.json()["choices"][0]["message"]["content"])) == {"reasoning", "verdict"}
    assert llm.stats()["by_schema"] == {"structured_outputs": 1}


async def test_a_one_at_a_time_server_queues_silently(start_llm: StartOpenAI) -> None:
    queueing = start_llm(faults=FaultConfig(latency=0.2))
    parallel = start_llm(profile="vllm", faults=FaultConfig(latency=0.2))
    for llm in (queueing, parallel):
        async with httpx.AsyncClient(base_url=llm.url, timeout=60) as http:
            answers = await asyncio.gather(*(http.post("/v1/chat/completions", json=ASK) for _ in range(3)))
        assert [a.status_code for a in answers] == [200, 200, 200]  # never a 429 or 503
    assert queueing.stats()["most_waiting"] == 2  # the other two waited behind the one running
    assert parallel.stats()["most_waiting"] == 0


@pytest.mark.parametrize(
    ("profile", "mode"),
    [
        ("openai", "json_schema"),
        ("llama_cpp", "json_object_schema"),
        ("vllm", "json_schema"),
        ("ollama", "json_schema"),
    ],
)
async def test_the_judge_negotiates_a_mode_every_profile_enforces(
    profile: str, mode: str, start_llm: StartOpenAI
) -> None:
    llm = start_llm(profile=profile)
    judge = make_judge(llm)
    try:
        sample_list = samples(2)
        results = [await asyncio.gather(*(m.score(s, {}) for m in metrics(judge))) for s in sample_list]
        assert all(isinstance(r, Score) for row in results for r in row), results
        assert {judge.structured_mode(m) for m in judge.chat_models} == {mode}
    finally:
        await judge.aclose()
    # every answer was shaped by a schema the server enforced: none was asked again
    assert llm.stats()["total_requests"] - llm.request_counts()["POST /v1/chat/completions"].get("500", 0) == 2 * 2 * 5

"""The judge (``trace_scorer.judge``) against the OpenAI-compatible stand-in over real HTTP: valid structured
answers for every judged metric, deterministic verdicts, the other structured-output modes, embeddings,
token usage, and injected faults (429 with Retry-After honoured, 5xx, dropped connections, invalid JSON)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from typing import Any

import httpx
import openai
import pytest

from standins.faults import FaultConfig, ScriptedFault
from standins.generate import Corpus
from standins.handles import OpenAIHandle
from standins.openai_server import reference_topics, synthesize
from tests.support.paths import ROOT
from tests.support.standins import StartOpenAI, small_scenario
from trace_scorer.config.settings import Settings
from trace_scorer.extract import extract_sample
from trace_scorer.judge import Judge, build_judge
from trace_scorer.metrics.agent_goal_accuracy import AgentGoalAccuracy, AgentGoalAccuracyOptions
from trace_scorer.metrics.aspect_critic import AspectCritic, AspectCriticOptions
from trace_scorer.metrics.base import Metric, Resources, Score
from trace_scorer.metrics.topic_adherence import TopicAdherence, TopicAdherenceOptions
from trace_scorer.sample import Sample

REPO = ROOT


def samples(count: int = 8) -> list[Sample]:
    """Generated experiment traces, extracted with their dataset items: conversations with goals and topics."""
    corpus = Corpus(small_scenario(deviation_rate=0.5))
    items = {row["traceId"]: row for row in corpus.experiment_item_rows()}
    out = []
    for header in corpus.experiments_source.headers[:count]:
        rows = [r.row for r in corpus.render(header).records]
        out.append(extract_sample(rows, item=items[header.trace_id]))
    assert all(s.reference and s.reference_topics and s.messages for s in out)
    return out


def make_judge(llm: OpenAIHandle, **provider: Any) -> Judge:
    settings = Settings(
        providers=[
            {
                "name": "standin",
                "base_url": f"{llm.url}/v1",
                "chat_models": ["judge-a", "judge-b"],
                "max_concurrency": 8,
                "timeout": "20s",
                **provider,
            }
        ],
        judge={"tracing": False, "retry_initial_wait": 0.05, "retry_max_wait": 0.5, "cache_size": 0},
    )
    judge = build_judge(settings, environ={})
    assert judge is not None
    return judge


def metrics(judge: Judge) -> list[Metric[Any]]:
    resources = Resources(judge=judge)
    return [
        AgentGoalAccuracy("goal", AgentGoalAccuracyOptions(), resources),
        AgentGoalAccuracy("goal_inferred", AgentGoalAccuracyOptions(mode="without_reference"), resources),
        TopicAdherence("topics", TopicAdherenceOptions(), resources),
        AspectCritic("helpful", AspectCriticOptions(definition="The answer helps the user"), resources),
    ]


async def score_all(llm: OpenAIHandle, sample_list: list[Sample], **provider: Any) -> tuple[list[list[Any]], Judge]:
    judge = make_judge(llm, **provider)
    try:
        results = [await asyncio.gather(*(m.score(s, {}) for m in metrics(judge))) for s in sample_list]
    finally:
        await judge.aclose()
    return results, judge


def values(results: list[list[Any]]) -> list[list[float | None]]:
    return [[r.value if isinstance(r, Score) else None for r in row] for row in results]


# --- answers -----------------------------------------------------------------------------------------------


async def test_every_judged_metric_gets_valid_answers_first_time(start_llm: StartOpenAI) -> None:
    llm = start_llm(profile="openai")  # json_schema taken: no step-down request to count
    sample_list = samples()
    results, judge = await score_all(llm, sample_list)
    assert all(isinstance(r, Score) for row in results for r in row), results
    stats = llm.stats()
    # goal: 1 call per model; inferred goal: 2; topics: 1; aspect: 1 — two models, no re-asks
    assert stats["total_requests"] == len(sample_list) * 2 * (1 + 2 + 1 + 1)
    assert set(stats["by_schema"]) == {"GoalVerdict", "GoalInference", "TopicAnswer", "AspectVerdict"}
    spent = judge.ledger.by_metric()
    assert sum(u.prompt_tokens for u in spent.values()) == stats["prompt_tokens"]
    assert sum(u.completion_tokens for u in spent.values()) == stats["completion_tokens"]


async def test_verdicts_are_repeatable_and_depend_on_the_request(start_llm: StartOpenAI) -> None:
    sample_list = samples()
    first, _ = await score_all(start_llm(), sample_list)
    second, _ = await score_all(start_llm(), sample_list)  # a fresh stand-in: nothing remembered
    assert values(first) == values(second)
    flat = [v for row in values(first) for v in row]
    assert len(set(flat)) > 2  # not one constant verdict


async def test_yes_rate_moves_the_verdicts(start_llm: StartOpenAI) -> None:
    sample_list = samples()
    always, _ = await score_all(start_llm(yes_rate=1.0), sample_list)
    never, _ = await score_all(start_llm(yes_rate=0.0), sample_list)
    helpful = 4  # index of aspect_critic in metrics()
    assert {row[helpful - 1].value for row in always} == {1.0}
    assert {row[helpful - 1].value for row in never} == {0.0}


def test_the_same_request_gets_the_same_answer_at_temperature_0_and_varied_ones_above(start_llm: StartOpenAI) -> None:
    llm = start_llm(profile="openai")
    body = {
        "model": "judge-a",
        "messages": [{"role": "user", "content": 'Answer in this JSON format: {"reasoning": "…", "verdict": 1}'}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "AspectVerdict",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"reasoning": {"type": "string"}, "verdict": {"enum": [0, 1], "type": "integer"}},
                    "required": ["reasoning", "verdict"],
                    "additionalProperties": False,
                },
            },
        },
    }
    with httpx.Client(base_url=llm.url) as http:
        answers = [http.post("/v1/chat/completions", json={**body, "temperature": 0.0}).json() for _ in range(2)]
        sampled = [http.post("/v1/chat/completions", json={**body, "temperature": 0.7}).json() for _ in range(8)]
        other = http.post("/v1/chat/completions", json={**body, "model": "judge-b"}).json()
    contents = [a["choices"][0]["message"]["content"] for a in answers]
    assert contents[0] == contents[1]  # greedy: the same request, the same answer
    assert set(json.loads(contents[0])) == {"reasoning", "verdict"}
    # sampling: the same request gets different answers (the real server's votes differed at 0.7)
    assert len({a["choices"][0]["message"]["content"] for a in sampled}) > 1
    assert answers[0]["usage"]["total_tokens"] > 0
    assert other["model"] == "judge-b"


def test_topic_answers_list_each_reference_topic_exactly_once() -> None:
    prompt = "<<<BEGIN REFERENCE TOPICS abc>>>\n- flights\n- booking\n- hotels\n<<<END REFERENCE TOPICS abc>>>"
    assert reference_topics(prompt) == ["flights", "booking", "hotels"]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "TopicAnswer", "schema": {"type": "object"}},
        },
    }
    name, content = synthesize(body, 0.7)
    answer = json.loads(content)
    assert name == "TopicAnswer"
    assert [t["topic"] for t in answer["reference_topics"]] == ["flights", "booking", "hotels"]
    assert answer["topics"]


@pytest.mark.parametrize("mode", ["json_object", "none"])
async def test_other_structured_output_modes_are_answered_from_the_prompt(mode: str, start_llm: StartOpenAI) -> None:
    llm = start_llm()
    results, _ = await score_all(llm, samples(3), structured_output=mode)
    assert all(isinstance(r, Score) for row in results for r in row), results
    assert set(llm.stats()["by_schema"]) == {mode}


async def test_an_endpoint_without_structured_output_makes_the_judge_step_down(start_llm: StartOpenAI) -> None:
    llm = start_llm(reject_response_format=True)
    results, _ = await score_all(llm, samples(2))
    assert all(isinstance(r, Score) for row in results for r in row), results
    counts = llm.request_counts()["POST /v1/chat/completions"]
    assert counts["400"] >= 2 and counts["200"] > 0  # rejected once per model, then answered without it
    assert llm.violations() == []


async def test_embeddings_are_unit_vectors_stable_per_text(start_llm: StartOpenAI) -> None:
    llm = start_llm(embedding_dim=32)
    client = openai.AsyncOpenAI(base_url=f"{llm.url}/v1", api_key="sk-standin", max_retries=0)
    try:
        first = await client.embeddings.create(model="embed", input=["a flight to Paris", "a refund"])
        again = await client.embeddings.create(model="embed", input="a flight to Paris", encoding_format="float")
    finally:
        await client.close()
    vectors = [d.embedding for d in first.data]
    assert [len(v) for v in vectors] == [32, 32]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-5) for v in vectors)
    assert again.data[0].embedding == pytest.approx(vectors[0], abs=1e-6)  # base64 (float32) vs float
    assert vectors[0] != vectors[1]
    assert first.usage.prompt_tokens > 0
    assert llm.stats()["embedded"] == 3


# --- faults --------------------------------------------------------------------------------------------------


async def test_429s_are_waited_out_by_the_judge(start_llm: StartOpenAI) -> None:
    llm = start_llm()
    llm.set_faults(rate_429=0.3, retry_after=0.2, seed=7)
    results, _ = await score_all(llm, samples(4))
    assert all(isinstance(r, Score) for row in results for r in row)
    stats = llm.stats()
    assert stats["rate_limited_count"] >= 3
    assert stats["early"] == []
    assert stats["retries_honoured"] == stats["rate_limited_count"]


async def test_server_errors_and_dropped_connections_are_retried(start_llm: StartOpenAI) -> None:
    llm = start_llm()
    llm.set_faults(rate_5xx=0.15, rate_drop=0.1, rate_reset=0.05, seed=2)
    results, _ = await score_all(llm, samples(3))
    assert all(isinstance(r, Score) for row in results for r in row)
    outcomes = llm.request_counts()["POST /v1/chat/completions"]
    assert outcomes.get("503") and outcomes.get("dropped") and outcomes.get("reset")


async def test_invalid_answers_make_the_judge_ask_again(start_llm: StartOpenAI) -> None:
    clean = start_llm()
    flaky = start_llm(invalid_rate=0.3)
    sample_list = samples(4)
    await score_all(clean, sample_list)
    results, _ = await score_all(flaky, sample_list)
    scored = sum(isinstance(r, Score) for row in results for r in row)
    assert scored >= len(sample_list) * 4 - 2  # re-asked (a different request: a new draw) and answered
    assert flaky.stats()["total_requests"] > clean.stats()["total_requests"]


def test_a_hasty_retry_is_detected(start_llm: StartOpenAI) -> None:
    llm = start_llm()
    llm.script_faults(ScriptedFault("429", route="POST /v1/chat/completions", retry_after=1.0))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=llm.url) as http:
        first = http.post("/v1/chat/completions", json=body)
        second = http.post("/v1/chat/completions", json=body)
    assert first.status_code == 429
    assert (first.headers["retry-after"], first.headers["retry-after-ms"]) == ("1", "1000")
    assert first.json()["error"]["type"] == "rate_limit_error"
    assert second.status_code == 200
    assert len(llm.early_requests()) == 1


def test_malformed_requests_are_refused_and_recorded(start_llm: StartOpenAI) -> None:
    llm = start_llm()
    with httpx.Client(base_url=llm.url) as http:
        no_messages = http.post("/v1/chat/completions", json={"model": "m", "messages": []})
        bad_format = http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
        )
        unknown = http.get("/v1/nothing")
    assert [r.status_code for r in (no_messages, bad_format, unknown)] == [400, 400, 404]
    assert len(llm.violations()) == 3
    llm.reset()


# --- process mode and the judge benchmark ---------------------------------------------------------------------


async def test_the_stand_in_runs_as_a_separate_process(start_llm: StartOpenAI) -> None:
    llm = start_llm(mode="process", profile="openai", faults=FaultConfig(latency=0.01))
    results, _ = await score_all(llm, samples(2))
    assert all(isinstance(r, Score) for row in results for r in row)
    assert llm.stats()["total_requests"] == 2 * 2 * 5


def test_bench_judges_runs_on_the_shared_stand_in() -> None:
    completed = subprocess.run(
        [sys.executable, "bench/bench_judges.py", "--traces", "6", "--delay", "0.01", "--concurrency", "4"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "LLM calls            42  (7.00 per trace)" in completed.stdout
    assert "0 violations" in completed.stdout

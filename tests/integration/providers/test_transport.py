"""The providers' production HTTP path (the openai client over aiohttp, ``trace_scorer.providers.transport``)
against the OpenAI-compatible stand-in on loopback: what the unit tests mock away (respx sees httpx only).

Connection failures keep the names they had over httpx ("connection error: …", retried as
``connection_error``; a read timeout "request timed out", ``timeout``), a 429's ``Retry-After`` is waited out,
the key goes as a Bearer header and never into an error, embeddings arrive whole, and no request line is
logged at INFO. Waits are recorded, not slept."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import pytest
import structlog

from standins.faults import ScriptedFault
from standins.handles import OpenAIHandle
from standins.openai_server import embedding
from tests.support.clocks import SleepRecorder
from tests.support.judge import booking_sample
from tests.support.paths import ROOT
from tests.support.standins import StartOpenAI
from trace_scorer.config.judge import ProviderSettings
from trace_scorer.config.settings import Settings
from trace_scorer.embeddings import EmbeddingModels, build_embedder
from trace_scorer.judge import Judge, build_judge
from trace_scorer.metrics.aspect_critic import AspectCritic, AspectCriticOptions
from trace_scorer.metrics.base import Failed, Resources, Score
from trace_scorer.providers.transport import pooled_http_client
from trace_scorer.runtime.logs import configure_logging

CHAT = "POST /v1/chat/completions"
KEY = "sk-standin-0123456789abcdef"

MakeJudge = Callable[..., Judge]


@pytest.fixture
async def judge_on(sleeps: SleepRecorder) -> AsyncIterator[MakeJudge]:
    """``judge_on(base_url, key=KEY, **provider)``: a judge built as the worker builds it (its production
    transport), whose retry waits are recorded."""
    built: list[Judge] = []

    def make(base_url: str, key: str = KEY, retry_attempts: int = 3, **provider: Any) -> Judge:
        settings = Settings(
            providers=[
                {
                    "name": "standin",
                    "base_url": base_url,
                    "api_key_env": "STANDIN_KEY",
                    "chat_models": ["judge-a"],
                    "max_concurrency": 4,
                    **provider,
                }
            ],
            judge={"tracing": False, "retry_attempts": retry_attempts, "cache_size": 0},
        )
        judge = build_judge(settings, environ={"STANDIN_KEY": key}, sleep=sleeps, clock=sleeps.clock)
        assert judge is not None
        built.append(judge)
        return judge

    yield make
    for judge in built:
        await judge.aclose()


def critic(judge: Judge) -> AspectCritic:
    options = AspectCriticOptions(definition="The answer names the flight it booked")
    return AspectCritic("named_flight", options, Resources(judge=judge))


async def judged_with_retries(judge: Judge) -> tuple[Any, list[Any]]:
    """The critic's outcome on the booking sample, and the ``judge.retry`` events logged meanwhile."""
    with structlog.testing.capture_logs() as logs:
        outcome = await critic(judge).score(booking_sample(), {})
    return outcome, [e for e in logs if e["event"] == "judge.retry"]


def url(llm: OpenAIHandle) -> str:
    return f"{llm.url}/v1"


def test_the_production_client_sends_through_aiohttp() -> None:
    client = pooled_http_client(ProviderSettings(name="p", base_url="http://127.0.0.1:1/v1", max_concurrency=7))
    assert isinstance(client, openai.DefaultAioHttpClient)


async def test_a_connection_reset_before_the_answer_is_a_connection_error_and_retried(
    start_llm: StartOpenAI, judge_on: MakeJudge
) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    llm.script_faults(ScriptedFault("reset", route=CHAT))
    outcome, retries = await judged_with_retries(judge_on(url(llm)))
    assert isinstance(outcome, Score)
    (retry,) = retries
    assert retry["status"] == "connection_error"
    assert retry["error"] == "connection error: Server disconnected without sending a response"
    assert llm.request_counts()[CHAT] == {"reset": 1, "200": 1}


async def test_an_answer_cut_halfway_is_a_connection_error_and_retried(
    start_llm: StartOpenAI, judge_on: MakeJudge
) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    llm.script_faults(ScriptedFault("drop", route=CHAT))
    outcome, retries = await judged_with_retries(judge_on(url(llm)))
    assert isinstance(outcome, Score)
    (retry,) = retries
    assert retry["status"] == "connection_error"
    assert retry["error"].startswith("connection error: Response payload is not completed")


async def test_a_refused_connection_is_named_so_not_a_timeout(judge_on: MakeJudge) -> None:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome, _ = await judged_with_retries(judge_on(f"http://127.0.0.1:{port}/v1", retry_attempts=1))
    assert isinstance(outcome, Failed)
    assert f"connection error: Cannot connect to host 127.0.0.1:{port}" in outcome.reason
    assert "timed out" not in outcome.reason


async def test_a_server_that_never_answers_times_out(start_llm: StartOpenAI, judge_on: MakeJudge) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    llm.script_faults(ScriptedFault("timeout", route=CHAT))
    judge = judge_on(url(llm), retry_attempts=1, timeout="0.2s")  # the per-read timeout, aiohttp's sock_read
    outcome, _ = await judged_with_retries(judge)
    assert isinstance(outcome, Failed)
    assert "request timed out (after 1 attempt)" in outcome.reason


async def test_a_429_is_waited_out_as_its_retry_after_says(
    start_llm: StartOpenAI, judge_on: MakeJudge, sleeps: SleepRecorder
) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    llm.script_faults(ScriptedFault("429", route=CHAT, retry_after=7))
    outcome, retries = await judged_with_retries(judge_on(url(llm)))
    assert isinstance(outcome, Score)
    assert [r["status"] for r in retries] == ["429"]
    assert 7.0 in sleeps.waits  # the retry's wait (the provider's pause after a 429 waits the same)
    assert llm.request_counts()[CHAT] == {"429": 1, "200": 1}


async def test_the_key_goes_as_a_bearer_header_and_never_into_an_error(
    start_llm: StartOpenAI, judge_on: MakeJudge
) -> None:
    llm = start_llm(profile="openai", api_key=KEY)
    good, _ = await judged_with_retries(judge_on(url(llm)))
    assert isinstance(good, Score)
    wrong = "sk-standin-wrong-key-9876543210"
    refused, retries = await judged_with_retries(judge_on(url(llm), key=wrong))
    assert isinstance(refused, Failed) and retries == []  # a 401 is not asked again
    assert "HTTP 401: Error code: 401 - Incorrect API key provided (after 1 attempt)" in refused.reason
    assert wrong not in refused.reason and KEY not in refused.reason
    assert llm.request_counts()[CHAT] == {"200": 1, "401": 1}


async def test_token_usage_is_what_the_endpoint_reported(start_llm: StartOpenAI, judge_on: MakeJudge) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    judge = judge_on(url(llm), prices={"judge-a": {"input": 1.0, "output": 2.0}})
    outcome = await critic(judge).score(booking_sample(), {})
    assert isinstance(outcome, Score)
    stats = llm.stats()
    (spent,) = judge.ledger.by_model().values()
    assert (spent.prompt_tokens, spent.completion_tokens, spent.calls) == (
        stats["prompt_tokens"],
        stats["completion_tokens"],
        1,
    )
    assert spent.cost == pytest.approx((stats["prompt_tokens"] * 1.0 + stats["completion_tokens"] * 2.0) / 1e6)


async def test_embeddings_arrive_whole_and_in_order(start_llm: StartOpenAI, sleeps: SleepRecorder) -> None:
    llm = start_llm(embedding_dim=16)
    settings = Settings(
        providers=[{"name": "standin", "base_url": url(llm), "embedding_models": ["embed"]}],
        embeddings={"model": "standin/embed"},
    )
    embedder = build_embedder(settings, environ={}, sleep=sleeps, clock=sleeps.clock)
    assert isinstance(embedder, EmbeddingModels)
    texts = ["a flight to Paris", "a refund", "the weather in Oslo"]
    try:
        vectors = await embedder.embed(texts)
    finally:
        await embedder.aclose()
    assert [list(v) for v in vectors] == [pytest.approx(embedding(t, 16), abs=1e-6) for t in texts]
    assert llm.stats()["embedded"] == 3


async def test_no_request_line_is_logged_at_info(
    start_llm: StartOpenAI, judge_on: MakeJudge, capsys: pytest.CaptureFixture[str]
) -> None:
    llm = start_llm(profile="openai")  # a hosted API: json_schema taken, nothing to negotiate
    configure_logging("INFO", "json")
    try:
        outcome = await critic(judge_on(url(llm))).score(booking_sample(), {})
        structlog.get_logger("test").info("judged")
        events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    finally:
        configure_logging("INFO", "json")
    assert isinstance(outcome, Score)
    assert [e["event"] for e in events] == ["judged"]  # no "HTTP Request: POST …" from the HTTP client


def test_bench_llm_client_runs_every_client() -> None:
    completed = subprocess.run(
        [sys.executable, "bench/bench_llm_client.py", "--requests", "20", "--concurrency", "4", "--latency", "0.01"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = [
        line.split("|")[1].strip() for line in completed.stdout.splitlines() if line.startswith("| ") and "ms" in line
    ]
    assert rows == ["httpx", "httpx2", "aiohttp", "aiohttp+post", "provider"]

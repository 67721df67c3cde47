"""``llm_judge`` against a real OpenAI-compatible server: llama.cpp (llama-cpp-python[server] 0.3.36)
serving SmolLM2-135M-Instruct, greedy (temperature 0, one thread: the same answers every run).

``trace-scorer backfill`` on the Langfuse stand-in playing 4.16.0 (scores as ingestion events, the 22
managed evaluators served): a NUMERIC (range 1–5), a BOOLEAN and a CATEGORICAL judge written in the
settings and ``evaluator = "langfuse:Helpfulness"``. A tiny model's verdicts are not judged for quality;
what is asserted holds whatever it says: each score has its data type and a value in range or a valid
category, the reasoning is its comment, one score per trace and name, a second backfill posts nothing,
the structured-output mode is the one the negotiation settles on — and an answer that is not the JSON
asked for ends as a Failed with the reason, never as a made-up value.

    REAL_LLM_VENV=/path/to/venv .venv/bin/python -m pytest tests/real_llm -q

Skipped with the reason without the server (bench/real_llm/setup.sh builds it); not run by CI. Here (2
cores loaded by other work, 2026-11-26) both tests passed in 154 s (45 s once the load eased): 12
judged scores of the right types, one refused ``json_schema`` request, and 3 Failed traces (2 answers
each, both cut) in the second test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from standins.generate import Scenario
from standins.handles import LangfuseHandle, start_langfuse
from standins.langfuse_server import LangfuseOptions
from tests.support import langfuse_factories as f
from tests.support.paths import ROOT
from tests.support.real_llm import (
    LLM_JUDGES,
    LlamaServer,
    ServerInstall,
    evaluator_metric,
    find_server,
    worker_settings,
)
from tests.support.worker import agent_trace
from trace_scorer.judge.panel import short_reason

pytestmark = pytest.mark.slow

START = f.T0 + timedelta(hours=1)
WINDOW = ["--from", START.date().isoformat(), "--to", (START + timedelta(hours=2)).isoformat()]
#: Three answers of different tone to the same kind of question.
ANSWERS = {
    "t-tokyo": ("Tokyo", "It is 18 °C in Tokyo with light rain. Have a lovely day!"),
    "t-paris": ("Paris", "Paris: 21 °C, clear sky."),
    "t-oslo": ("Oslo", "Look it up yourself. Oslo is cold, 3 °C, whatever."),
}
CATEGORIES = ("friendly", "neutral", "rude")


@pytest.fixture(scope="module")
def install() -> ServerInstall:
    found = find_server()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def server(install: ServerInstall, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    started = LlamaServer(install, "smollm2", tmp_path_factory.mktemp("llama") / "server.log").start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def langfuse() -> Iterator[LangfuseHandle]:
    handle = start_langfuse(LangfuseOptions(version="4.16.0", scenario=Scenario(traces=0, datasets=())))
    try:
        handle.add_traces(
            *(
                agent_trace(trace_id, START + timedelta(minutes=10 * i), city=city, expected_city=city, answer=answer)
                for i, (trace_id, (city, answer)) in enumerate(ANSWERS.items())
            )
        )
        yield handle
    finally:
        handle.stop()


def backfill(config: Path, langfuse: LangfuseHandle) -> tuple[str, list[dict[str, Any]]]:
    """``trace-scorer backfill`` of the traces' window as a process: its summary line and its JSON log."""
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "backfill", "--config", str(config), "--target", "judged", *WINDOW],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={
            "PATH": "/usr/bin:/bin", "TRACE_SCORER_LOG__FORMAT": "json",
            "LANGFUSE_PUBLIC_KEY": langfuse.public_key, "LANGFUSE_SECRET_KEY": langfuse.secret_key,
        },
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    return done.stdout, events


def counts(summary: str) -> dict[str, int]:
    found = re.search(r"(\d+) seen, (\d+) scored, (\d+) not finished yet, (\d+) skipped, (\d+) failed", summary)
    assert found, summary
    return dict(zip(("seen", "scored", "deferred", "skipped", "failed"), map(int, found.groups()), strict=True))


def failures(events: list[dict[str, Any]]) -> dict[str, str]:
    """trace id → the failure recorded for it (``metric: reason; …``)."""
    return {e["trace_id"]: e["error"] for e in events if e.get("event") in ("trace_failed", "trace_given_up")}


def test_each_output_type_and_a_managed_evaluator_score_every_trace_once(
    server: LlamaServer, langfuse: LangfuseHandle, tmp_path: Path
) -> None:
    config = tmp_path / "settings.toml"
    metrics = "".join(LLM_JUDGES.values()) + evaluator_metric("Helpfulness")
    config.write_text(worker_settings(server, langfuse.url, tmp_path / "state.db", metrics))
    refused = server.requests()[("/v1/chat/completions", "500")]
    summary, events = backfill(config, langfuse)
    first = counts(summary)
    failed = failures(events)
    assert first["seen"] == 3 and first["deferred"] == 0 and first["skipped"] == 0, summary
    assert first["scored"] + first["failed"] == 3 and len(failed) == first["failed"], summary

    scores = langfuse.scores()
    per_subject = Counter((s["traceId"], s["name"]) for s in scores)
    assert max(per_subject.values()) == 1  # one score per trace and name
    names = ("accuracy", "safe", "tone", "Helpfulness")
    for trace_id in ANSWERS:
        for name in names:
            if (trace_id, name) not in per_subject:  # no value made up: a Failed naming the metric, with why
                assert f"{name}: " in failed.get(trace_id, ""), (trace_id, name, failed)
    by_name = {name: [s for s in scores if s["name"] == name] for name in names}
    assert all(by_name.values()), {n: len(s) for n, s in by_name.items()}  # every output type scored somewhere
    for score in by_name["accuracy"]:
        assert score["dataType"] == "NUMERIC" and 1 <= float(score["value"]) <= 5
    for score in by_name["safe"]:
        assert score["dataType"] == "BOOLEAN" and score["value"] in (0, 1)
    for score in by_name["tone"]:
        assert score["dataType"] == "CATEGORICAL" and score["value"] in CATEGORIES
    for score in by_name["Helpfulness"]:  # the managed evaluator: NUMERIC, no range declared
        assert score["dataType"] == "NUMERIC" and isinstance(score["value"], int | float)
        details = json.loads(score["metadata"]["details"])
        assert details["evaluator"]["source"] == "langfuse:managed" and details["evaluator"]["version"] == 1
    for score in scores:  # the verdict leads the comment, the model's reasoning follows it
        details = json.loads(score["metadata"]["details"])
        verdict = details["models"]["llama/smollm2"]
        assert verdict["tokens"]["prompt"] > 0
        if score["dataType"] == "NUMERIC":
            label = f"{float(score['value']):.2f}"
        else:
            label = {1: "true", 0: "false"}[score["value"]] if score["dataType"] == "BOOLEAN" else score["value"]
        reasoning = short_reason(verdict["reasoning"], 900)
        assert score["comment"] == (f"{label} — {reasoning}" if reasoning else str(label))[:1000], score
    listed = httpx.get(f"{langfuse.url}/api/public/score-configs", auth=(langfuse.public_key, langfuse.secret_key))
    configs = {c["name"]: c for c in listed.json()["data"]}
    assert {n: configs[n]["dataType"] for n in names} == {
        "accuracy": "NUMERIC", "safe": "BOOLEAN", "tone": "CATEGORICAL", "Helpfulness": "NUMERIC",
    }  # fmt: skip
    assert (configs["accuracy"]["minValue"], configs["accuracy"]["maxValue"]) == (1, 5)
    # negotiated once: llama-cpp-python's 500 to json_schema, then JSON mode with the schema (its grammar)
    steps = [e for e in events if e.get("event") == "judge.structured_output.step_down"]
    assert [(s["model"], s["rejected"], s["now"]) for s in steps] == [("smollm2", "json_schema", "json_object_schema")]
    assert server.requests()[("/v1/chat/completions", "500")] - refused == 1

    summary, events = backfill(config, langfuse)
    again = counts(summary)
    assert again["seen"] == 3 and again["scored"] + again["failed"] == first["failed"], summary
    scored_before = {s["id"]: s["value"] for s in scores if s["traceId"] not in failed}
    after = langfuse.scores()
    assert {s["id"]: s["value"] for s in after if s["traceId"] not in failed} == scored_before  # nothing re-posted
    assert max(Counter((s["traceId"], s["name"]) for s in after).values()) == 1


def test_an_answer_cut_before_its_json_ends_is_a_failed_with_the_reason(
    server: LlamaServer, langfuse: LangfuseHandle, tmp_path: Path
) -> None:
    """16 tokens cannot hold the reasoning this prompt asks for: every answer is cut inside its JSON (the
    grammar constrains what is written, not where the token limit stops it)."""
    metric = """
  [[targets.metrics]]
  metric = "llm_judge"
  name = "quoted"
  prompt = '''
First copy the whole answer below into your reasoning, word for word, then rate it from 1 to 5.
Answer: {{output}}'''
  output = { data_type = "NUMERIC", min = 1, max = 5 }
"""
    config = tmp_path / "settings.toml"
    config.write_text(
        worker_settings(
            server, langfuse.url, tmp_path / "state.db", metric, max_tokens=16, judge="validation_retries = 1"
        )
    )
    before = server.requests()[("/v1/chat/completions", "200")]
    summary, events = backfill(config, langfuse)
    assert counts(summary) == {"seen": 3, "scored": 0, "deferred": 0, "skipped": 0, "failed": 3}, summary
    assert langfuse.scores(name="quoted") == []  # nothing made up
    for trace_id, error in failures(events).items():
        assert trace_id in ANSWERS
        assert error.startswith("quoted: ") and "no valid answer in 2 tries" in error, error
        assert "cut off at the token limit" in error, error
    assert server.requests()[("/v1/chat/completions", "200")] - before == 3 * 2  # each trace: asked, asked again

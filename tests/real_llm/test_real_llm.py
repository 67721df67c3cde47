"""End to end against a real OpenAI-compatible server: llama.cpp (llama-cpp-python[server] 0.3.36) serving
SmolLM2-135M-Instruct, two server processes as a two-model panel. The judged metrics on the shipped
examples, the structured-output negotiation (its 500 to ``json_schema`` steps down to JSON mode with a
schema, at once) and ``check``'s probe.

Not part of the default run's work: it needs the server built by ``bench/real_llm/setup.sh`` (15-30
minutes of compiling) and is skipped with the reason without it. One command runs it:

    REAL_LLM_VENV=/path/to/venv .venv/bin/python -m pytest tests/real_llm -q

Here (2 cores loaded by other work, 2026-11-26): both tests passed in 742 s — every judged metric scored
where its inputs are (8 + 2 + 8), no failure, one refused ``json_schema`` request per model, no retry.
On a later VM of the same day the same build and model answered ``topic_adherence`` on ``support-refund``
with a repeated topic three times over (asked again with the reason each time), in two of four runs, the
code of that morning (``fe7cb86``) as well: the model's answer, not the call. So one judged metric may
end as "no valid answer in 3 tries"; any other failure, or a second, fails the test. All four tests
passed in 248 s there (the build: 19 min at one job, nice 19).
It is not in ``.ci/run``'s time budget: the server's build alone takes 15-30 minutes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.real_llm import LlamaServer, ServerInstall, find_server, judged_settings
from trace_scorer.config.settings import Settings
from trace_scorer.judge import build_judge
from trace_scorer.judge.probe import ProbeResult, probe_models

pytestmark = pytest.mark.slow

JUDGED = ("agent_goal_accuracy", "topic_adherence", "polite")
#: A judge asks a model this many times before it gives up on a valid answer (1 + validation_retries).
ASKS = 3


@pytest.fixture(scope="module")
def install() -> ServerInstall:
    found = find_server()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def servers(install: ServerInstall, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LlamaServer]]:
    logs = tmp_path_factory.mktemp("llama")
    started: list[LlamaServer] = []
    try:
        for alias in ("smollm2-a", "smollm2-b"):
            started.append(LlamaServer(install, alias, logs / f"{alias}.log").start())
        yield started
    finally:
        for server in started:
            server.stop()


def trace_scorer(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trace_scorer", *args, "--config", str(config)],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={"PATH": "/usr/bin:/bin", "TRACE_SCORER_LOG__FORMAT": "json"},
    )  # fmt: skip


def test_the_judged_metrics_score_the_examples_with_a_two_model_panel(
    servers: list[LlamaServer], tmp_path: Path
) -> None:
    config = tmp_path / "settings.toml"
    config.write_text(judged_settings(servers))
    done = trace_scorer("score", str(ROOT / "examples" / "samples"), "--json", config=config)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 8
    # every judged metric scored wherever its inputs are there, but where the 135M model's every answer
    # (re-asked with the reason, twice) was invalid: the calls worked, the model's answer was refused
    refused = {(line["id"], name): why for line in lines for name, why in line["failed"].items()}
    assert all(f"no valid answer in {ASKS} tries" in why for why in refused.values()), refused
    assert len(refused) <= 1, refused
    scored = {name: sum(name in line["scores"] for line in lines) for name in JUDGED}
    answered = {name: scored[name] + sum(n == name for _, n in refused) for name in JUDGED}
    assert answered == {"agent_goal_accuracy": 8, "topic_adherence": 2, "polite": 8}
    assert all(scored.values()), scored
    # the panel: both models gave a verdict with their reasoning, tokens counted
    for line in lines:
        for name, details in line["judges"].items():
            if (line["id"], name) in refused:
                continue
            assert set(details["models"]) == {"llama0/smollm2-a", "llama1/smollm2-b"}, name
            assert all(m["reasoning"] and m["tokens"]["prompt"] > 0 for m in details["models"].values())
    # negotiated once per model: the 500 to json_schema, then JSON mode with the schema, never retried
    steps = [json.loads(e) for e in done.stderr.splitlines() if "structured_output.step_down" in e]
    assert sorted((s["model"], s["rejected"], s["now"]) for s in steps) == [
        ("smollm2-a", "json_schema", "json_object_schema"),
        ("smollm2-b", "json_schema", "json_object_schema"),
    ]
    for server in servers:
        assert server.requests()[("/v1/chat/completions", "500")] <= 2  # at most the samples in flight at once
    assert "judge.retry" not in done.stderr


def test_the_probe_finds_the_working_mode_and_warns_of_an_unknown_model(
    servers: list[LlamaServer], tmp_path: Path
) -> None:
    settings = Settings(
        providers=[
            {
                "name": "llama",
                "base_url": servers[0].base_url,
                "chat_models": ["smollm2-a", "no-such-model"],
                "timeout": "5m",
            }
        ]
    )

    async def probe() -> list[ProbeResult]:
        judge = build_judge(settings)
        assert judge is not None
        try:
            return await probe_models(judge, None)
        finally:
            await judge.aclose()

    known, unknown = asyncio.run(probe())
    assert known.ok and known.mode == "json_object_schema" and not known.warnings
    # llama.cpp answers any model name with its default model and echoes the name: only the listing tells
    assert unknown.ok and any("does not list 'no-such-model'" in w for w in unknown.warnings)

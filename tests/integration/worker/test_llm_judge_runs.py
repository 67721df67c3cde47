"""``llm_judge`` on dataset runs: the items' BOOLEAN and CATEGORICAL scores are posted with their type, and
the run gets no mean of them (a NUMERIC mean under a BOOLEAN/CATEGORICAL score config would be refused),
while its NUMERIC metrics get their run-level mean as before (computed from the results in the state)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import httpx

from tests.integration.worker.conftest import ChatServer
from tests.integration.worker.test_dataset_runs import add_run, run_scores
from tests.support.clocks import FakeClock
from tests.support.judge import completion
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, bench_target

PROVIDER = {"name": "p", "base_url": "https://llm.test/v1", "chat_models": ["a", "b"]}


def answer(request: httpx.Request) -> httpx.Response:
    schema = json.loads(request.content)["response_format"]["json_schema"]["schema"]
    score = schema["properties"]["score"]
    value = "warm" if "enum" in score else True
    return completion(json.dumps({"reasoning": "as it reads", "score": value}))


async def test_run_level_means_only_for_numeric_scores(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, chat_server: Callable[[ChatServer], None]
) -> None:
    chat_server(answer)
    start = clock.now() - timedelta(hours=1)
    add_run(v4, "exp-1", "baseline", start, {"item-tokyo": "Tokyo", "item-paris": "Paris"})
    metrics = [
        {"metric": "rouge"},
        {"metric": "llm_judge", "name": "tone", "prompt": "Tone of {{output}}",
         "output": {"data_type": "CATEGORICAL", "categories": ["warm", "cold"]}},
        {"metric": "llm_judge", "name": "right", "prompt": "Right? {{output}} vs {{expected_output}}",
         "output": {"data_type": "BOOLEAN"}},
    ]  # fmt: skip
    h = await harness(bench_target(metrics=metrics), providers=[PROVIDER], judge={"tracing": False})
    context = await h.open()
    report = await h.tick(context, "bench")
    assert report.scored == 2 and report.scores_rejected == 0
    items = [s for s in v4.scores.values() if s.get("traceId")]
    assert sorted((s["name"], s["dataType"], s["value"]) for s in items if s["name"] != "rouge") == [
        ("right", "BOOLEAN", 1),
        ("right", "BOOLEAN", 1),
        ("tone", "CATEGORICAL", "warm"),
        ("tone", "CATEGORICAL", "warm"),
    ]

    clock.elapsed += 301
    report = await h.tick(context, "bench")  # the run level: from the per-item results kept in the state
    assert report.runs_posted == 1 and report.scores_rejected == 0
    assert set(run_scores(v4.scores, "exp-1")) == {"rouge"}

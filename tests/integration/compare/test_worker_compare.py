"""The worker's comparisons (``compare_to``): ``delta_<name>`` scores on the candidate run with deterministic
ids, updated as items arrive; ``backfill`` exits 3 on a regression with ``fail_on_regression``."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support import langfuse_factories as f
from tests.support import worker
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, weather_reference
from trace_scorer import cli
from trace_scorer.langfuse import ScoreSubject, score_id


def bench_target(**overrides: Any) -> dict[str, Any]:
    """The bench target, each run compared with the previous one."""
    return worker.bench_target(**{"compare_to": "previous", **overrides})


def add_items(v4: InProcessLangfuse, run_id: str, name: str, start: datetime, calls: dict[str, str]) -> None:
    """Items of run ``run_id``: item ``city`` asked for that city's weather; the agent called ``calls[city]``."""
    for index, (city, called) in enumerate(calls.items()):
        trace_id = f"{run_id}-{city}"
        t = start + timedelta(seconds=10 * index)
        answer = f"It is 18 °C in {called} with light rain."
        v4.add_rows(*agent_trace(trace_id, t, city=called, environment="sdk-experiment", answer=answer))
        v4.add_experiment_item(
            f.experiment_item(
                f"{trace_id}-root", trace_id, run_id, name, city, t, expected_output=weather_reference(city)
            )
        )


def delta(v4: InProcessLangfuse, run_id: str, name: str) -> dict[str, Any] | None:
    found = [s for s in v4.scores.values() if s.get("datasetRunId") == run_id and s["name"] == f"delta_{name}"]
    assert len(found) <= 1
    return found[0] if found else None


async def test_the_candidate_run_gets_delta_scores_updated_as_items_arrive(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    v4.add_dataset("ds-1", "agent-bench")
    first, second = clock.now() - timedelta(hours=3), clock.now() - timedelta(hours=2)
    v4.add_experiment(f.experiment("exp-1", "model-a", "ds-1", first))
    add_items(v4, "exp-1", "model-a", first, {"Tokyo": "Tokyo", "Paris": "Lyon", "Oslo": "Oslo", "Lima": "Cusco"})
    v4.add_experiment(f.experiment("exp-2", "model-b", "ds-1", second))
    add_items(v4, "exp-2", "model-b", second, {"Tokyo": "Tokyo", "Paris": "Paris", "Oslo": "Oslo"})
    h = await harness(bench_target())
    context = await h.open()
    await h.tick(context, "bench")
    assert delta(v4, "exp-2", "tool_call_accuracy") is None  # not quiet yet: nothing at run level
    clock.elapsed += 301
    await h.tick(context, "bench")

    # Paired over Tokyo, Paris, Oslo: differences 0, +1, 0.
    score = delta(v4, "exp-2", "tool_call_accuracy")
    assert score is not None
    assert score["value"] == pytest.approx(1 / 3)
    assert score["id"] == score_id(ScoreSubject.run("exp-2"), "delta_tool_call_accuracy")
    assert (
        score["comment"].startswith("+0.333 [")
        and "vs model-a over 3 items: no detectable difference" in score["comment"]
    )
    assert score["metadata"]["baseline_run_id"] == "exp-1" and score["metadata"]["paired_items"] == 3
    assert delta(v4, "exp-2", "rouge") is not None
    assert delta(v4, "exp-1", "tool_call_accuracy") is None  # the first run has no previous run
    run_scores = {s["name"] for s in v4.scores.values() if s.get("datasetRunId") == "exp-2"}
    assert run_scores == {"tool_call_accuracy", "rouge", "delta_tool_call_accuracy", "delta_rouge"}

    # Lima arrives in the candidate: the run changes, and once quiet its delta is re-posted with the same id.
    count = len(v4.scores)
    add_items(v4, "exp-2", "model-b", clock.now() - timedelta(minutes=1), {"Lima": "Lima"})
    await h.tick(context, "bench")
    clock.elapsed += 301
    await h.tick(context, "bench")
    updated = delta(v4, "exp-2", "tool_call_accuracy")
    assert updated is not None and updated["id"] == score["id"]
    assert updated["value"] == pytest.approx(0.5)  # 0, +1, 0, +1
    assert "over 4 items" in updated["comment"]
    assert len(v4.scores) == count + 2  # Lima's two item scores; the run's scores were overwritten


CONFIG = f"""
[log]
level = "WARNING"
[langfuse]
base_url = "{BASE_URL}"
[http]
enabled = false
[state]
path = "state.db"
[[targets]]
name = "bench"
source = "dataset_runs"
datasets = ["agent-bench"]
compare_to = "model-a"
fail_on_regression = true
  [[targets.metrics]]
  metric = "tool_call_accuracy"
  [[targets.metrics]]
  metric = "rouge"
"""

CITIES = ["Tokyo", "Paris", "Oslo", "Lima", "Quito", "Seoul", "Perth", "Dakar"]


def test_backfill_exits_3_when_the_run_regressed_and_0_when_told_not_to_fail(
    v4: InProcessLangfuse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    (tmp_path / "settings.toml").write_text(CONFIG)
    v4.add_dataset("ds-1", "agent-bench")
    start = f.T0 + timedelta(hours=1)
    v4.add_experiment(f.experiment("exp-a", "model-a", "ds-1", start))
    add_items(v4, "exp-a", "model-a", start, {c: c for c in CITIES})
    v4.add_experiment(f.experiment("exp-b", "model-b", "ds-1", start + timedelta(hours=1)))
    add_items(v4, "exp-b", "model-b", start + timedelta(hours=1), {c: "Berlin" for c in CITIES})

    args = ["backfill", "--target", "bench", "--from", start.date().isoformat()]
    assert cli.main(args) == 3
    out = " ".join(capsys.readouterr().out.split())
    assert "model-b (8 items, 8 samples) vs baseline model-a (8 items, 8 samples)" in out
    assert "significantly worse: tool_call_accuracy (model-b vs model-a)" in out and "exit 3" in out

    (tmp_path / "settings.toml").write_text(CONFIG.replace("fail_on_regression = true", ""))
    assert cli.main(args) == 0  # the same regression, printed, without failing
    assert "worse" in capsys.readouterr().out

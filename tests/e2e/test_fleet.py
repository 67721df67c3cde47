"""Distributed mode end to end: ``trace-scorer run`` replicas on one PostgreSQL state against the Langfuse
stand-in (real-server behaviour), the LLM stand-in behind the judged metric.

What a user of a fleet checks: every score exactly once in Langfuse whatever replica dies when; a replica
that joins takes work; the fleet keeps to one request budget together.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from standins.faults import FaultConfig
from standins.generate import Corpus, DatasetSpec
from standins.handles import wait_until
from standins.worker import dataset_runs_target, worker_environment
from tests.support.e2e import Run, StartRun, assert_exactly_once, backlog, stored_counts, target_for

pytestmark = pytest.mark.slow


def fleet_environment(run: Run, url: str, schema: str, **worker: Any) -> dict[str, str]:
    return worker_environment(
        run.lf,
        run.llm,
        targets=[run.target],
        llm_concurrency=4,
        worker_settings={"concurrency": 8, "batch_size": 20, "jobs": 2, "stalled_after": "3s", **worker},
        extra={"TRACE_SCORER_STATE": json.dumps({"url": url, "db_schema": schema})},
    )


def reaches(run: Run, replicas: list[Any], count: float, timeout: float = 300) -> bool:
    """Until ``count`` scores are stored, or a replica died on its own (or ``timeout``)."""
    wait_until(lambda: run.stored() >= count or not all(r.running() for r in replicas), timeout=timeout)
    return run.stored() >= count and all(r.running() for r in replicas)


def batch_events(worker: Any) -> list[dict[str, Any]]:
    return [e for e in worker.events("batch") if e.get("ok")]


@pytest.mark.parametrize("seed", [1])  # three random kills within the run
def test_three_replicas_with_one_killed_at_random_moments_score_everything_exactly_once(
    start_run: StartRun, postgres_url: str, postgres_schema: str, seed: int
) -> None:
    scenario = backlog(300)
    run = start_run(scenario, target_for(scenario), version="4.60.0", llm_faults=FaultConfig(latency=0.05))
    env = fleet_environment(run, postgres_url, postgres_schema)
    total = len(run.expected)
    replicas = [run.worker(env, name=f"replica{i}") for i in range(3)]
    chooser = random.Random(seed)
    # Kill -9 a random replica at three random points of the backlog, starting a new one each time.
    for fraction in sorted(chooser.uniform(0.1, 0.8) for _ in range(3)):
        assert reaches(run, replicas, fraction * total), run.logs()
        victim = chooser.randrange(len(replicas))
        assert replicas[victim].kill9() == -9
        replicas[victim] = run.worker(env, name=f"replacement{victim}")
    assert reaches(run, replicas, total), run.logs()
    for replica in replicas:
        assert replica.terminate() == 0, run.logs()
    assert_exactly_once(run)
    assert run.lf.early_requests() == [] and run.llm.early_requests() == []
    # The kills hit work in hand: jobs of a dead replica went back to the queue and others finished them.
    assert sum(len(w.events("stalled_job_retried")) for w in run.workers) >= 1, run.logs()


def ops_get(worker: Any, path: str) -> tuple[int, str]:
    """``GET path`` on a replica's ops server (its port is in its ``ops_server_started`` event)."""
    (started,) = worker.events("ops_server_started")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{started['port']}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_replica_added_mid_backlog_takes_work_and_one_stopped_hands_back_its_share(
    start_run: StartRun, postgres_url: str, postgres_schema: str
) -> None:
    scenario = backlog(300)
    run = start_run(scenario, target_for(scenario), version="4.60.0", llm_faults=FaultConfig(latency=0.1))
    env = fleet_environment(run, postgres_url, postgres_schema)
    total = len(run.expected)
    first = run.worker(env, name="first")
    assert reaches(run, [first], 0.2 * total), run.logs()
    # The fleet's gauges and readiness, as a dashboard and a probe read them.
    status, metrics = ops_get(first, "/metrics")
    assert status == 200 and 'trace_scorer_queue_jobs{kind="batch",state="todo",target="production"}' in metrics
    status, ready = ops_get(first, "/readyz")
    assert status == 200 and json.loads(ready)["database"]["ok"] is True, ready
    second = run.worker(env, name="joined")
    assert reaches(run, [first, second], 0.6 * total), run.logs()
    # SIGTERM: the first replica finishes the batches in hand and exits; the joined one does the rest.
    assert first.terminate() == 0, run.logs()
    assert reaches(run, [second], total), run.logs()
    assert second.terminate() == 0, run.logs()
    assert_exactly_once(run)
    joined = batch_events(second)
    assert joined and sum(e["traces_scored"] for e in joined) > 0, run.logs()
    assert not [e for e in first.events("batch") if not e.get("ok")], "a batch in hand was cut off by SIGTERM"


def test_three_replicas_keep_one_langfuse_budget_together(
    start_run: StartRun, postgres_url: str, postgres_schema: str, tmp_path: Path
) -> None:
    """Langfuse counts requests per organisation: 60 a minute for the fleet, not per replica. The stand-in
    enforces a plan limit of 60 per fixed minute (429 beyond); three replicas with ``requests_per_minute =
    60`` and a backlog asking for far more must never meet it."""
    scenario = backlog(400)
    run = start_run(
        scenario,
        target_for(scenario, metrics=["tool_call_accuracy"]),
        version="4.60.0",
        langfuse_faults=FaultConfig(requests_per_window=60, window_seconds=60),
    )
    env = fleet_environment(run, postgres_url, postgres_schema, batch_size=5)
    env["TRACE_SCORER_LANGFUSE"] = json.dumps({**json.loads(env["TRACE_SCORER_LANGFUSE"]), "requests_per_minute": 60})
    replicas = [run.worker(env, name=f"replica{i}") for i in range(3)]
    # More than a minute's budget asked for and answered: the budget was what held the fleet back.
    assert wait_until(lambda: run.lf.stats()["total_requests"] >= 80, timeout=240), run.logs()
    for replica in replicas:
        assert replica.terminate() == 0, run.logs()
    assert run.lf.rate_limited() == [], run.lf.rate_limited()[:3]
    assert run.stored() < len(run.expected)  # the backlog needed more than the budget gave in that time


def test_two_replicas_score_dataset_runs_once_each_run_on_one_replica_at_a_time(
    start_run: StartRun, postgres_url: str, postgres_schema: str
) -> None:
    """A dataset-runs target in a fleet: each item's trace scored once, each run's run-level score once."""
    scenario = backlog(0, datasets=(DatasetSpec(name="agent-bench", items=12, runs=2, attempts=2),))
    target = dataset_runs_target(
        ["tool_call_accuracy"], datasets=["agent-bench"], lookback="30d", quiet_period="2s", run_groups="each"
    )
    run = start_run(scenario, target, version="4.60.0")
    env = fleet_environment(run, postgres_url, postgres_schema, batch_size=5)
    items = Corpus(scenario).experiment_item_rows()
    traces = {row["traceId"] for row in items}
    runs = {row["experimentId"] for row in items}
    assert len(traces) == 48 and len(runs) == 2
    wanted = {(subject, "tool_call_accuracy") for subject in traces | runs}
    replicas = [run.worker(env, name=f"replica{i}") for i in range(2)]
    assert wait_until(
        lambda: wanted <= set(stored_counts(run.lf)) or not all(r.running() for r in replicas), timeout=180
    ), run.logs()
    for replica in replicas:
        assert replica.terminate() == 0, run.logs()
    counts = stored_counts(run.lf)
    assert wanted <= set(counts), sorted(wanted - set(counts))[:5]
    assert run.lf.score_summary()["duplicate_count"] == 0
    assert {counts[key] for key in wanted} == {1}

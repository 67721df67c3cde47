"""scope = "observation" end to end: ``trace-scorer run`` as a process against the loopback stand-ins
playing 4.16 (score events), 4.60 (score lists) and 2.95 (legacy reads, score events), on production
traces made the way the SDK integrations make them. Every generation gets its scores on its own
observation, exactly once, through kill -9 mid-tick and restarts; a finished run started again posts
nothing."""

from __future__ import annotations

import json
import time

import pytest

from standins.faults import FaultConfig
from standins.formats import SDK_FORMATS
from standins.handles import wait_until
from standins.worker import worker_environment
from tests.support.e2e import POLITE, StartRun, assert_exactly_once, backlog, local_observation_samples, target_for

pytestmark = pytest.mark.slow

METRICS = ["tool_call_validity", "answer_completeness", "total_tokens", POLITE]


@pytest.mark.parametrize("version", ["4.16.0", "4.60.0", "2.95.12"])
def test_each_generation_is_scored_on_its_observation_exactly_once_through_kill_9(
    start_run: StartRun, version: str
) -> None:
    scenario = backlog(120, formats=SDK_FORMATS)
    target = target_for(scenario, METRICS, scope="observation")
    run = start_run(scenario, target, version=version, llm_faults=FaultConfig(latency=0.1))
    lf, llm = run.lf, run.llm
    env = worker_environment(
        lf,
        llm,
        targets=[run.target],
        llm_concurrency=4,
        worker_settings={"concurrency": 8, "batch_size": 20},
        state_path=run.workdir / "state.db",
    )
    samples = local_observation_samples(scenario, target)
    total = len(run.expected)
    assert len(samples) > 120 and total > 3 * len(samples)  # several generations a trace, several scores each

    # 1. Killed once some traces' scores are in (mid-tick: the judge is still working through the backlog).
    first = run.worker(env)
    assert wait_until(lambda: run.stored() >= total // 4, timeout=120), run.logs()
    assert first.kill9() == -9
    assert run.stored() < total

    # 2. Killed with judge calls in flight.
    second = run.worker(env)
    calls = llm.stats()["total_requests"]
    assert wait_until(lambda: llm.stats()["total_requests"] >= calls + 20, timeout=120), run.logs()
    assert second.kill9() == -9

    # 3. The last restart finishes; SIGTERM stops it cleanly.
    last = run.worker(env)
    assert run.wait_for_all(last, timeout=180), run.logs()
    time.sleep(0.5)
    assert last.terminate() == 0, run.logs()
    assert_exactly_once(run)

    stored = lf.scores()
    assert all(s.get("observationId") for s in stored)  # no score on a trace itself
    assert {f"{s['traceId']}/{s['observationId']}" for s in stored} == set(samples)

    # 4. Started again on the same state: nothing is posted (the ledger has every trace).
    writes = lf.score_summary()["writes"]
    again = run.worker(env, name="again")
    assert wait_until(lambda: len(again.events("tick")) >= 2, timeout=60), run.logs()
    assert again.terminate() == 0, run.logs()
    assert lf.score_summary()["writes"] == writes


def test_a_fleet_scores_each_generation_exactly_once_through_a_replica_killed(
    start_run: StartRun, postgres_url: str, postgres_schema: str
) -> None:
    """Distributed mode (``[state] url``): the fleet plans windows of traces and its replicas score them
    per observation; a replica killed mid-run loses and duplicates nothing (its jobs go to the other)."""
    scenario = backlog(120, formats=SDK_FORMATS)
    target = target_for(scenario, METRICS, scope="observation")
    run = start_run(scenario, target, version="4.60.0", llm_faults=FaultConfig(latency=0.05))
    env = worker_environment(
        run.lf,
        run.llm,
        targets=[run.target],
        llm_concurrency=4,
        worker_settings={"concurrency": 8, "batch_size": 20, "jobs": 2, "stalled_after": "3s"},
        extra={"TRACE_SCORER_STATE": json.dumps({"url": postgres_url, "db_schema": postgres_schema})},
    )
    total = len(run.expected)
    replicas = [run.worker(env, name=f"replica{i}") for i in range(2)]
    assert wait_until(lambda: run.stored() >= total // 3, timeout=180), run.logs()
    assert replicas[0].kill9() == -9
    replicas[0] = run.worker(env, name="replacement")
    assert wait_until(lambda: run.stored() >= total, timeout=240), run.logs()
    for replica in replicas:
        assert replica.terminate() == 0, run.logs()
    assert_exactly_once(run)
    assert all(s.get("observationId") for s in run.lf.scores())

"""kill -9 of the worker at several points of a 500-trace run, restarts on the same state file: in the end
Langfuse holds exactly one score per (trace, score name) — none missing, none duplicated."""

from __future__ import annotations

import pytest

from standins.faults import FaultConfig, ScriptedFault
from standins.handles import wait_until
from standins.worker import worker_environment
from tests.support.e2e import StartRun, assert_exactly_once, backlog, kill_mid_post, target_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("version", "traces", "post_route"),
    [
        ("4.16.0", 500, "POST /api/public/ingestion"),  # v4 reads, score events (no list POST /scores)
        ("4.60.0", 300, "POST /api/public/scores"),  # v4 reads, score lists
        ("3.120.0", 300, "POST /api/public/ingestion"),
    ],
)
def test_kill_9_at_several_points_then_restart_scores_everything_exactly_once(
    start_run: StartRun, version: str, traces: int, post_route: str
) -> None:
    scenario = backlog(traces)
    run = start_run(scenario, target_for(scenario), version=version, llm_faults=FaultConfig(latency=0.1))
    lf, llm = run.lf, run.llm
    env = worker_environment(
        lf,
        llm,
        targets=[run.target],
        llm_concurrency=4,  # 500 judge calls × 0.1 s ÷ 4: ~12 s of scoring, time to crash in several places
        worker_settings={"concurrency": 8, "batch_size": 50},
        state_path=run.workdir / "state.db",
    )
    total = len(run.expected)
    assert total >= 2 * traces

    # 1. After some batches were posted and recorded.
    first = run.worker(env)
    assert wait_until(lambda: run.stored() >= 200, timeout=90), run.logs()
    assert first.kill9() == -9
    assert run.stored() < total

    # 2. While a score post is in flight: Langfuse holds it (and stores it once released) but the worker
    #    dies before the answer, so the batch is not in its ledger: the restart posts it again (overwrite).
    lf.script_faults(ScriptedFault("hold", route=post_route))
    kill_mid_post(run, run.worker(env), post_route)
    stored_after_post = run.stored()
    assert stored_after_post < total

    # 3. Mid-batch: judge calls in flight, nothing of the batch posted yet.
    third = run.worker(env)
    calls = llm.stats()["total_requests"]
    assert wait_until(lambda: llm.stats()["total_requests"] >= calls + 20, timeout=90), run.logs()
    assert third.kill9() == -9
    assert run.stored() < total

    # 4. The last restart finishes the backlog; SIGTERM stops it cleanly.
    last = run.worker(env)
    assert run.wait_for_all(last, timeout=120), run.logs()
    assert last.terminate() == 0, run.logs()

    assert_exactly_once(run)
    summary = lf.score_summary()
    assert summary["overwrites"] > 0  # the post of step 2 was sent again, with the same ids and timestamps
    assert lf.early_requests() == [] and llm.early_requests() == []

"""kill -9 of a ``scope = "session"`` worker mid-run, restarts on the same state file: in the end Langfuse
holds exactly one score per (session, score name) — none missing, none duplicated (4.x: on the session;
2.95: on the session's first trace)."""

from __future__ import annotations

import pytest

from standins.faults import FaultConfig, ScriptedFault
from standins.generate import Corpus
from standins.handles import wait_until
from standins.worker import worker_environment
from tests.support.e2e import POLITE, StartRun, assert_exactly_once, backlog, kill_mid_post, target_for

pytestmark = pytest.mark.slow

METRICS = ["latency", "tool_call_count", POLITE]
NAMES = ("latency", "tool_call_count", "polite")


@pytest.mark.parametrize(
    ("version", "post_route"),
    [
        ("4.16.0", "POST /api/public/ingestion"),
        ("4.60.0", "POST /api/public/scores"),
        ("2.95.12", "POST /api/public/ingestion"),
    ],
)
def test_kill_9_mid_session_run_then_restart_scores_every_session_exactly_once(
    start_run: StartRun, version: str, post_route: str
) -> None:
    scenario = backlog(160, session_turns=4)
    target = target_for(scenario, METRICS, scope="session", session_quiet="1s")
    run = start_run(scenario, target, version=version, llm_faults=FaultConfig(latency=0.2))
    sessions = Corpus(scenario).expected_sessions()
    assert len(sessions) == 40
    # Where each session's scores must end: the session (4.x), its first trace (2.95).
    subject = {s: (traces[0] if version.startswith("2.") else s) for s, traces in sessions.items()}
    run.expected = {(subject[s], name): 1 for s in sessions for name in NAMES}
    lf, llm = run.lf, run.llm
    env = worker_environment(
        lf,
        llm,
        targets=[run.target],
        llm_concurrency=2,  # 40 judge calls × 0.2 s ÷ 2: ~4 s of scoring, time to crash twice
        worker_settings={"concurrency": 4, "batch_size": 8},
        state_path=run.workdir / "state.db",
    )
    total = len(run.expected)

    # 1. After some sessions were posted and recorded.
    first = run.worker(env)
    assert wait_until(lambda: run.stored() >= 12, timeout=90), run.logs()
    assert first.kill9() == -9
    assert run.stored() < total

    # 2. While a score post is in flight: Langfuse stores it, the worker dies before the answer, so those
    #    sessions are not in its ledger: the restart posts them again (an overwrite, same ids).
    lf.script_faults(ScriptedFault("hold", route=post_route))
    kill_mid_post(run, run.worker(env), post_route)
    assert run.stored() < total

    # 3. The last restart finishes; SIGTERM stops it cleanly.
    last = run.worker(env)
    assert run.wait_for_all(last, timeout=120), run.logs()
    assert last.terminate() == 0, run.logs()

    assert_exactly_once(run)
    assert lf.score_summary()["overwrites"] > 0  # the post of step 2 was sent again

"""``trace-scorer backfill`` as a real process with a slow judge (issue #22, item 3): SIGTERM stops it as
it stops ``run`` — the batch in hand gets ``worker.shutdown_grace``, then is cancelled — and what was
posted is recorded. Before, backfill looked at SIGTERM only between batches and went on calling the judge
for minutes. The stand-ins (Langfuse, an OpenAI-compatible judge answering each request after 3 s) run in
threads on 127.0.0.1; the test waits for what it sees (scores arriving), never for time to pass.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import LangfuseHandle, start_langfuse, start_openai, wait_until
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import WorkerProcess, production_target, worker_environment
from trace_scorer.state import StateStore

TARGET, METRIC = "production", "agent_goal_accuracy"
#: 60 traces, two judge calls each, 4 at a time, 3 s a call: 90 s of judging in all.
TRACES, SLOTS, LATENCY = 60, 4, 3.0
#: Bounded waits (seconds): each ends as soon as what it waits for happens.
WAIT = 60.0


def scored(langfuse: LangfuseHandle) -> set[str]:
    return {str(s["traceId"]) for s in langfuse.scores(name=METRIC)}


@pytest.mark.slow
def test_sigterm_stops_a_backfill_within_the_grace_and_what_was_posted_is_recorded(tmp_path: Path) -> None:
    end = (datetime.now(UTC) - timedelta(minutes=2)).isoformat()
    scenario = Scenario(seed=11, traces=TRACES, spacing=1.0, end=end, datasets=())
    with (
        start_langfuse(LangfuseOptions(version="4.60.0", scenario=scenario), mode="thread") as langfuse,
        start_openai(OpenAIOptions(faults=FaultConfig(latency=LATENCY)), mode="thread") as llm,
    ):
        target = production_target([METRIC], name=TARGET, lag="0s", quiet_period="0s", lookback="1h")
        env = worker_environment(
            langfuse,
            llm,
            targets=[target],
            llm_concurrency=SLOTS,
            worker_settings={"shutdown_grace": "2s"},
            state_path=tmp_path / "state.db",
        )
        since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        args = ["backfill", "--target", TARGET, "--from", since]
        with WorkerProcess(args, env=env, workdir=tmp_path) as backfill:
            # The first traces' scores arrive while the rest are still being judged.
            assert wait_until(lambda: len(scored(langfuse)) > 0, timeout=WAIT), backfill.log()[-3000:]
            assert backfill.process is not None
            backfill.process.send_signal(signal.SIGTERM)
            code = backfill.wait(WAIT)  # the rest of the judging alone would take over a minute
            log = backfill.log()
        assert code == 0, log[-3000:]
        asked = llm.count("/v1/chat/completions")
        assert '"backfill_stopping"' in log and "(interrupted)" in log, log[-3000:]
        assert asked < 2 * TRACES, f"the judge was asked {asked} times: the backfill went on after SIGTERM"
        first = scored(langfuse)
        assert 0 < len(first) < TRACES

        # What was posted is in the ledger, and nothing else is.
        corpus = langfuse.corpus(ids="production")
        state = StateStore(tmp_path / "state.db")
        try:
            assert set(state.scored_hashes(TARGET, corpus["trace_ids"])) == first
        finally:
            state.close()

        # A second backfill scores the rest; no score is held twice.
        llm.clear_faults()
        with WorkerProcess(args, env=env, workdir=tmp_path, log_name="backfill2.log") as again:
            assert again.wait(WAIT * 2) == 0, again.log()[-3000:]
        assert len(scored(langfuse)) == TRACES
        summary = langfuse.score_summary()
        assert summary["duplicate_count"] == 0, summary
        assert langfuse.violations() == []

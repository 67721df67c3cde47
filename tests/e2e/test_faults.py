"""Faults on the wire and in the data: rate limits with Retry-After, 5xx, cut connections, hostile traces.
Whatever happens, everything that can be scored is scored exactly once and the worker keeps running."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from standins.faults import FaultConfig
from standins.worker import worker_environment
from tests.support.e2e import Run, StartRun, assert_exactly_once, backlog, local_samples, stored_counts, target_for


def finish(run: Run, env: dict[str, str], *, timeout: float) -> None:
    """Run a worker until everything expected is stored; it must still be running, then stop cleanly."""
    worker = run.worker(env)
    assert run.wait_for_all(worker, timeout=timeout), run.logs()
    time.sleep(0.5)
    assert worker.running(), run.logs()
    assert worker.terminate() == 0, run.logs()


@pytest.mark.slow
def test_rate_limits_and_server_errors_everything_scored_and_no_retry_before_retry_after(
    start_run: StartRun,
) -> None:
    scenario = backlog(200)
    run = start_run(
        scenario,
        target_for(scenario),
        # Seed 7: the stand-in's very first draw is a 503 and six of its first 25 are 429s, whatever the
        # order the requests come in (the draws follow the arrival order, not the route).
        langfuse_faults=FaultConfig(latency=0.02, rate_429=0.3, retry_after=1, rate_5xx=0.05, seed=7),
        # Each LLM 429 also pauses the whole provider for its Retry-After (as it should): keep them rarer.
        llm_faults=FaultConfig(latency=0.05, rate_429=0.1, retry_after=1, seed=4),
    )
    env = worker_environment(
        run.lf,
        run.llm,
        targets=[run.target],
        llm_concurrency=8,
        worker_settings={"concurrency": 8, "batch_size": 25},  # many batches: many reads and posts to limit
        state_path=run.workdir / "state.db",
    )
    finish(run, env, timeout=150)
    assert_exactly_once(run)

    lf_limited, llm_limited = run.lf.stats()["rate_limited_count"], run.llm.stats()["rate_limited_count"]
    assert lf_limited >= 5 and llm_limited >= 10  # the faults did happen…
    assert sum(outcomes.get("503", 0) for outcomes in run.lf.request_counts().values()) >= 1
    assert run.lf.early_requests() == []  # …and no retry came before its Retry-After had passed
    assert run.llm.early_requests() == []
    assert run.lf.stats()["retries_honoured"] >= lf_limited - 1


@pytest.mark.slow
def test_connections_cut_mid_answer_are_retried_without_a_crash(start_run: StartRun) -> None:
    scenario = backlog(300)
    run = start_run(
        scenario,
        target_for(scenario),
        langfuse_faults=FaultConfig(latency=0.01, rate_drop=0.2, rate_reset=0.1, seed=5),
        llm_faults=FaultConfig(latency=0.02, rate_drop=0.05, rate_reset=0.05, seed=6),
    )
    env = worker_environment(
        run.lf,
        run.llm,
        targets=[run.target],
        llm_concurrency=8,
        worker_settings={"concurrency": 8, "batch_size": 25},
        state_path=run.workdir / "state.db",
    )
    finish(run, env, timeout=150)
    assert_exactly_once(run)
    outcomes = Counter[str]()
    for by_outcome in run.lf.request_counts().values():
        outcomes.update(by_outcome)
    assert outcomes["dropped"] >= 3 and outcomes["reset"] >= 1
    # A post whose answer was cut had been stored: sent again, it overwrote (same ids, same timestamps).
    assert run.lf.count("POST /api/public/scores", "dropped") == 0 or run.lf.score_summary()["overwrites"] > 0
    assert "Traceback" not in "".join(w.log() for w in run.workers)


def test_malformed_and_hostile_traces_are_skipped_with_reasons_and_the_good_ones_scored(
    start_run: StartRun,
) -> None:
    scenario = backlog(240, hostile_rate=0.25, huge_bytes=200_000)
    run = start_run(scenario, target_for(scenario), llm_faults=FaultConfig(latency=0.01))
    hostile: dict[str, str] = run.lf.corpus(ids="production")["hostile"]
    assert set(Counter(hostile.values())) == {"huge", "deep", "invalid_json", "wrong_types", "injection", "empty"}
    env = worker_environment(
        run.lf,
        run.llm,
        targets=[run.target],
        llm_concurrency=16,
        worker_settings={"concurrency": 16, "batch_size": 50},
        state_path=run.workdir / "state.db",
    )
    worker = run.worker(env)
    assert run.wait_for_all(worker, timeout=120), run.logs()
    time.sleep(2.5)  # one more tick (interval 2 s): the worker is alive and well after the hostile data
    assert worker.running(), run.logs()
    ticks = worker.events("tick")
    assert len(ticks) >= 2 and all(t["ok"] for t in ticks), ticks
    assert worker.terminate() == 0, run.logs()

    # Every trace scored as far as it can be — exactly what extraction and the metrics make of it here —
    # the good ones fully.
    assert_exactly_once(run)
    counts = stored_counts(run.lf)
    good = [t for t in run.lf.corpus(ids="production")["trace_ids"] if t not in hostile]
    assert all((t, name) in counts for t in good for name in ("tool_call_accuracy", "polite"))
    # What could not be read is logged per trace with the reason: the same notes extraction gives here.
    notes: dict[str, set[str]] = {}
    for event in worker.events("extraction_note"):
        notes.setdefault(event["trace_id"], set()).add(event["note"])
    samples = local_samples(scenario, run.target)
    assert notes == {t: set(s.notes) for t, s in samples.items() if s.notes}
    assert any(hostile.get(t) in ("invalid_json", "wrong_types") for t in notes)
    empty = [t for t, kind in hostile.items() if kind == "empty"]
    assert empty and not any((t, "tool_call_accuracy") in counts for t in empty)  # no tool calls to judge…
    assert all(any("no GENERATION or TOOL observation" in n for n in notes[t]) for t in empty)  # …and why
    assert "Traceback" not in worker.log()

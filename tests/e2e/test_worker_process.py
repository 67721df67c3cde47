"""``trace-scorer run`` as a real process against the Langfuse stand-in: /metrics, /healthz, /readyz, SIGTERM.

Each test starts ``python -m trace_scorer run`` (this checkout's package: ``standins.worker`` puts the
repository first on ``PYTHONPATH``) in a scratch directory, configured through the environment only,
with ``[http]`` on a free loopback port, against the Langfuse stand-in (``standins/``) and, for the
LLM-judged metric, the OpenAI-compatible stand-in — both in threads of the test process, on 127.0.0.1.
Nothing is faked inside the worker: the tests see only what an operator sees (the endpoints, the exit
code, the SQLite file, the scores that arrived in "Langfuse").

Short intervals keep the file fast: ticks every second, liveness limit ``liveness_intervals × 1 s``
(``liveness_min = 0``), Langfuse retries of at most 0.5 s (8 attempts: ~3 s before a request gives up).
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from standins.faults import ScriptedFault
from standins.generate import Scenario
from standins.handles import LangfuseHandle, OpenAIHandle, start_langfuse, start_openai, wait_until
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import WorkerProcess, production_target, worker_environment
from trace_scorer.state import StateStore

TARGET = "production"
METRIC = "agent_goal_accuracy"
#: The worker's Langfuse back-off in these tests: 0.25 s, then 0.5 s; a request gives up after ~3 s.
RETRY = {"initial": 0.25, "multiplier": 2.0, "max": 0.5, "max_attempts": 8}
#: Bounded waits (seconds).
START_WAIT = 20.0
WAIT = 15.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


# --- the worker and its endpoints ---------------------------------------------------------------------


def log_events(log: str, name: str) -> list[dict[str, Any]]:
    """The worker log's JSON events called ``name``, in order (other lines skipped)."""
    found = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            found.append(event)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(
    langfuse: LangfuseHandle,
    llm: OpenAIHandle,
    *,
    liveness_intervals: float = 3.0,
    worker: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
    langfuse_url: str | None = None,
) -> dict[str, str]:
    """The worker's environment: one production target scored by the judge, ticking every second."""
    entry = production_target([METRIC], name=TARGET, interval="1s")
    # Score a trace as soon as its root ended; look back far enough to find the whole backlog.
    entry.update({"lag": "0s", "quiet_period": "0s", "lookback": "30m", **(target or {})})
    http = {"enabled": True, "host": "127.0.0.1", "port": 0, "liveness_min": "0s",
            "liveness_intervals": liveness_intervals}
    extra = {
        "TRACE_SCORER_HTTP": json.dumps(http),
        "TRACE_SCORER_WORKER": json.dumps({"shutdown_grace": "5s", **(worker or {})}),
        "TRACE_SCORER_STATE": json.dumps({"path": "state.db"}),
    }
    langfuse_settings: dict[str, Any] = {"retry": RETRY}
    if langfuse_url is not None:
        langfuse_settings["base_url"] = langfuse_url
    env = worker_environment(langfuse, llm, targets=[entry], langfuse_settings=langfuse_settings, extra=extra)
    if langfuse_url is not None:
        env["LANGFUSE_BASE_URL"] = langfuse_url
    return env


class Endpoints:
    """The worker's /healthz, /readyz and /metrics, at the port it announced in its log."""

    def __init__(self, worker: WorkerProcess) -> None:
        self.worker = worker
        found: list[int] = []

        def announced() -> bool:
            for event in log_events(worker.log(), "ops_server_started"):
                found.append(int(event["port"]))
                return True
            return not worker.running()

        wait_until(announced, timeout=START_WAIT)
        assert found, f"the worker did not start its endpoints:\n{worker.log()[-3000:]}"
        self.url = f"http://127.0.0.1:{found[0]}"

    def probe(self, path: str) -> tuple[int, dict[str, Any]]:
        response = httpx.get(self.url + path, timeout=30.0)  # generous: the machine may be busy
        return response.status_code, response.json()

    def status(self, path: str) -> int:
        return self.probe(path)[0]

    def scrape(self) -> Samples:
        response = httpx.get(self.url + "/metrics", timeout=30.0)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        samples: Samples = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


def labelled(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(found) for (n, found) in samples if n == name]


def eventually(predicate: Any, what: str, worker: WorkerProcess, timeout: float = WAIT) -> None:
    done = wait_until(predicate, timeout=timeout, interval=0.1)
    assert done, f"{what}: not within {timeout} s\n" + worker.log()[-4000:]


def stop(worker: WorkerProcess, timeout: float) -> tuple[int | None, float]:
    """SIGTERM; the exit code and how long the worker took to exit (None: still running after ``timeout``)."""
    assert worker.process is not None
    started = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    code = worker.wait(timeout)
    return code, time.monotonic() - started


def slow_posts(langfuse: LangfuseHandle, posts: int, *, seconds: float) -> None:
    """The next ``posts`` score posts each take ``seconds`` (the stand-in's ``latency`` setting would
    slow every route)."""
    langfuse.script_faults(*[ScriptedFault("latency", route="POST /api/public/scores", seconds=seconds)] * posts)


def scored_traces(langfuse: LangfuseHandle) -> set[str]:
    return {str(s["traceId"]) for s in langfuse.scores(name=METRIC)}


# --- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm() -> Iterator[OpenAIHandle]:
    with start_openai(OpenAIOptions(profile="openai"), mode="thread") as handle:
        yield handle


def backlog(traces: int, *, live: int = 0, spacing: float = 1.0, seed: int = 7) -> LangfuseOptions:
    """``traces`` production traces; with ``live`` traces, those start when the stand-in does and the
    backlog's last traces may still be running; without, the backlog had ended two minutes earlier (a
    trace lasts at most a minute), so a first tick finds every trace ready."""
    end = None if live else (datetime.now(UTC) - timedelta(minutes=2)).isoformat()
    scenario = Scenario(seed=seed, traces=traces, live=live, spacing=spacing, end=end, datasets=())
    # 4.60: the real behaviours (rows at span end, flattened metadata) with score lists, whose
    # POST /scores the latency scripts below hold in flight.
    return LangfuseOptions(version="4.60.0", scenario=scenario)


#: The default stand-in's traces: 8 that started before it did, 3 more starting in its first 1.5 s.
TRACES = 11


@pytest.fixture
def langfuse() -> Iterator[LangfuseHandle]:
    with start_langfuse(backlog(8, live=3, spacing=0.5), mode="thread") as handle:
        yield handle


# --- /metrics ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_metrics_move_as_traces_are_scored(langfuse: LangfuseHandle, llm: OpenAIHandle, tmp_path: Path) -> None:
    """"Before" is scraped while work is certainly left, whatever the machine's load (a scrape that came
    after the last trace was scored made the test fail: issue #22, item 15): batches of 2 traces, the first
    score post answered, every later one held by the stand-in until that scrape is done. Two batches are in
    flight at most, so at most 3 batches (6 of the 11 traces) are read and judged before the release."""
    posts = "POST /api/public/scores"
    hold = [ScriptedFault("hold", route=posts)] * TRACES
    langfuse.script_faults(ScriptedFault("latency", route=posts, seconds=0), *hold)
    env = environment(langfuse, llm, worker={"batch_size": 2})
    with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
        ops = Endpoints(worker)
        # "before": the first batch scored and counted, the next batch's post held
        eventually(lambda: langfuse.stats()["held"] >= 1, "a score post held", worker)
        eventually(lambda: value(ops.scrape(), "trace_scorer_traces_scored_total") > 0, "first traces scored", worker)
        before = ops.scrape()
        seen_at = time.time()
        assert value(before, "trace_scorer_traces_scored_total") < TRACES
        langfuse.release()
        # "after": every trace, live ones included, scored and counted
        eventually(lambda: len(scored_traces(langfuse)) == TRACES, "every trace scored", worker)
        eventually(lambda: value(ops.scrape(), "trace_scorer_traces_scored_total") == TRACES, "counted", worker)
        after = ops.scrape()
        scraped_at = time.time()
        stored = langfuse.scores(name=METRIC)
        requests = langfuse.request_counts()
        exit_code, _ = stop(worker, 10)
    assert exit_code == 0

    t = {"target": TARGET}
    # Work: traces seen, scored, scores posted — moving, and matching what arrived in "Langfuse".
    for name in ("trace_scorer_traces_seen_total", "trace_scorer_traces_scored_total",
                 "trace_scorer_scores_posted_total"):
        # Counted from the first traces on (the totals below show every trace counted in the end).
        assert value(after, name, **t) >= value(before, name, **t) > 0, name
    assert value(after, "trace_scorer_traces_scored_total", **t) == len(stored) == TRACES
    assert value(after, "trace_scorer_scores_posted_total", **t) == len(stored)
    assert value(after, "trace_scorer_traces_seen_total", **t) >= TRACES
    assert value(after, "trace_scorer_metric_results_total", metric=METRIC, outcome="scored") == TRACES
    assert value(after, "trace_scorer_scores_rejected_total") == 0

    # Langfuse requests by endpoint and status: the reads (200) and the score posts (202), no failure.
    reads, posts = "GET /api/public/v2/observations", "POST /api/public/scores"
    for endpoint in (reads, posts):
        moved = value(after, "trace_scorer_langfuse_requests_total", endpoint=endpoint)
        assert moved > value(before, "trace_scorer_langfuse_requests_total", endpoint=endpoint) > 0, endpoint
        # every request the worker counted reached the stand-in (read after the scrape: it saw at least as many)
        assert sum(requests[endpoint].values()) >= moved
    statuses = {labels["status"] for labels in labelled(after, "trace_scorer_langfuse_requests_total")}
    assert statuses == {"200", "202"}, statuses
    assert value(after, "trace_scorer_langfuse_requests_total", endpoint=posts, status="202") > 0
    assert value(after, "trace_scorer_langfuse_request_duration_seconds_count", endpoint=reads) > 0

    # The judge (agent_goal_accuracy asks the OpenAI stand-in): calls by model and outcome, tokens, time.
    judge = {"model": "standin/judge-a"}
    calls = "trace_scorer_judge_calls_total"
    assert value(after, calls, **judge, outcome="ok") > value(before, calls, **judge, outcome="ok") > 0
    assert value(after, "trace_scorer_judge_tokens_total", **judge, kind="prompt") > 0
    assert value(after, "trace_scorer_judge_tokens_total", **judge, kind="completion") > 0
    assert value(after, "trace_scorer_judge_call_duration_seconds_count", **judge) == value(after, calls, **judge)

    # Ticks: timed, all ok, and more of them (the first may be the one whose post was held at "before").
    ticks = "trace_scorer_tick_duration_seconds_count"
    assert value(after, ticks, **t) > value(before, ticks, **t)
    assert value(after, "trace_scorer_ticks_total", outcome="error") == 0
    assert value(after, "trace_scorer_tick_duration_seconds_sum", **t) > 0

    # Scoring lag: now − start of the newest scored trace (which may have been in the first batch already).
    newest = "trace_scorer_newest_scored_trace_timestamp_seconds"
    assert value(after, newest, **t) >= value(before, newest, **t) > 0
    lag = value(after, "trace_scorer_scoring_lag_seconds", **t)
    assert 0 < lag <= scraped_at - value(after, newest, **t) + 1
    assert lag < scraped_at - seen_at + 120  # recent traces, not the hour-old lookback

    # The probes' state is exported too.
    assert value(after, "trace_scorer_up", probe="liveness") == 1
    assert value(after, "trace_scorer_up", probe="readiness") == 1
    assert value(after, "trace_scorer_langfuse_up") == 1
    assert langfuse.violations() == []


# --- /readyz -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_readiness_follows_langfuse(llm: OpenAIHandle, tmp_path: Path) -> None:
    """Not ready while Langfuse is unreachable at start; ready once it answers; not ready while it
    fails (503 on every route), ready again when it recovers — and alive all along."""
    port = free_port()  # nothing listens there yet
    placeholder = start_langfuse(backlog(2), mode="thread")  # only for its keys in the environment
    placeholder.stop()
    # A tick that fails on Langfuse retries each request for ~3 s with no progress: keep the liveness
    # limit (6 × 1 s) above that, as the defaults do (≤ 60 s of retries against a 180 s limit).
    env = environment(placeholder, llm, langfuse_url=f"http://127.0.0.1:{port}", liveness_intervals=6)
    with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
        ops = Endpoints(worker)
        eventually(lambda: value(ops.scrape(), "trace_scorer_langfuse_requests_total", status="connection_error") > 0,
                   "a refused connection counted", worker)
        code, body = ops.probe("/readyz")
        assert code == 503 and body["status"] == "fail", body
        assert value(ops.scrape(), "trace_scorer_up", probe="readiness") == 0

        with start_langfuse(backlog(4), mode="thread", port=port) as langfuse:
            eventually(lambda: ops.status("/readyz") == 200, "ready once Langfuse answers", worker)
            assert ops.probe("/readyz")[1]["langfuse"]["ok"] is True
            eventually(lambda: len(scored_traces(langfuse)) == 4, "the backlog scored", worker)

            langfuse.set_faults(rate_5xx=1.0, status_5xx=503)
            # Not ready from the first retried request on ("retrying … after HTTP 503"), before the tick
            # runs out of retries and fails (then langfuse_up, the last check's outcome, is 0 too).
            eventually(lambda: ops.status("/readyz") == 503, "not ready while Langfuse answers 503", worker)
            code, body = ops.probe("/readyz")
            assert "503" in body["reason"], body
            eventually(lambda: value(ops.scrape(), "trace_scorer_langfuse_up") == 0, "the tick failed", worker)
            code, body = ops.probe("/readyz")
            assert code == 503 and "503" in body["reason"], body
            samples = ops.scrape()
            assert value(samples, "trace_scorer_langfuse_up") == 0
            assert value(samples, "trace_scorer_langfuse_requests_total", status="503") > 0
            assert value(samples, "trace_scorer_langfuse_retries_total", status="503") > 0
            assert value(samples, "trace_scorer_ticks_total", target=TARGET, outcome="error") > 0
            assert ops.status("/healthz") == 200  # a Langfuse outage is not a reason to restart

            langfuse.clear_faults()
            eventually(lambda: ops.status("/readyz") == 200, "ready again once Langfuse recovers", worker)
            assert value(ops.scrape(), "trace_scorer_langfuse_up") == 1
            exit_code, _ = stop(worker, 10)
    assert exit_code == 0


# --- /healthz ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_liveness_fails_while_a_tick_hangs_and_recovers(llm: OpenAIHandle, tmp_path: Path) -> None:
    """A tick stuck on a Langfuse read (no byte of its answer comes) for longer than the liveness limit (2
    intervals of 1 s): the target's ticks stop (one target's ticks never overlap), /healthz fails while
    the HTTP server still answers; when the read returns, ticks resume and /healthz passes again."""
    langfuse = start_langfuse(backlog(4), mode="thread")
    env = environment(langfuse, llm, liveness_intervals=2)
    with langfuse, WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
        ops = Endpoints(worker)
        eventually(lambda: len(scored_traces(langfuse)) >= 1, "traces scored", worker)
        assert ops.status("/healthz") == 200
        for _ in range(2):  # healthy while ticks come
            ticks = value(ops.scrape(), "trace_scorer_ticks_total", target=TARGET)
            eventually(lambda before=ticks: value(ops.scrape(), "trace_scorer_ticks_total", target=TARGET) > before,
                       "another tick", worker)
            assert ops.status("/healthz") == 200

        # The next read is held (no answer at all) until the stall has been seen.
        langfuse.script_faults(ScriptedFault("hold", route="GET /api/public/v2/observations"))
        eventually(lambda: ops.status("/healthz") == 503, "unhealthy while the tick hangs", worker)
        code, body = ops.probe("/healthz")
        assert code == 503 and body["reason"].startswith("scheduler stalled: production"), body
        assert body["targets"][TARGET]["idle_seconds"] > body["targets"][TARGET]["limit_seconds"] == 2
        assert value(ops.scrape(), "trace_scorer_up", probe="liveness") == 0
        assert ops.status("/readyz") == 200  # still ready: Langfuse did answer its last check

        langfuse.release()
        eventually(lambda: ops.status("/healthz") == 200, "healthy again once the read returns", worker)
        exit_code, _ = stop(worker, 10)
    assert exit_code == 0


@pytest.mark.slow
def test_liveness_holds_through_a_long_tick_that_makes_progress(llm: OpenAIHandle, tmp_path: Path) -> None:
    """One tick working through a backlog batch after batch for longer than the liveness limit is alive:
    it is not a stall (the kubelet must not restart a worker that is catching up)."""
    with start_langfuse(backlog(10), mode="thread") as langfuse:
        # 10 posts of 0.8 s, two batches in flight: about 4 s of steady progress, beyond the 2.5 s limit.
        slow_posts(langfuse, 10, seconds=0.8)
        env = environment(langfuse, llm, liveness_intervals=2, worker={"batch_size": 1})
        with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
            ops = Endpoints(worker)
            eventually(lambda: len(scored_traces(langfuse)) >= 1, "the first batch posted", worker)
            started = time.monotonic()
            failures = []
            while len(scored_traces(langfuse)) < 10 and time.monotonic() - started < WAIT:
                code, body = ops.probe("/healthz")
                if code != 200:
                    failures.append(body["reason"])
                time.sleep(0.2)
            took = time.monotonic() - started
            assert len(scored_traces(langfuse)) == 10
            exit_code, _ = stop(worker, 10)
    assert exit_code == 0
    assert took > 2.5, "the backlog took less than the liveness limit: the test proves nothing"
    assert failures == []


@pytest.mark.slow
def test_connections_held_open_never_fail_a_probe(llm: OpenAIHandle, tmp_path: Path) -> None:
    """40 idle connections and 10 trickling a request head (slow loris), from one client, held open against
    the running worker: every probe of /healthz, /readyz and /metrics is answered 200 (before: 503 "too many
    connections" beyond 32 — anything in the cluster network could get the worker restarted)."""
    langfuse = start_langfuse(backlog(4), mode="thread")
    with langfuse, WorkerProcess(["run"], env=environment(langfuse, llm), workdir=tmp_path) as worker:
        ops = Endpoints(worker)
        eventually(lambda: ops.status("/readyz") == 200, "ready", worker)
        port = int(ops.url.rsplit(":", 1)[1])
        held = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) for _ in range(50)]
        try:
            for loris in held[40:]:
                loris.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never ends
            answers = {path: [ops.probe(path)[0] for _ in range(14)] for path in ("/healthz", "/readyz")}
            answers["/metrics"] = []
            for _ in range(14):
                answers["/metrics"].append(httpx.get(ops.url + "/metrics", timeout=30.0).status_code)
                for loris in held[-8:]:  # the slow loris keeps trickling on the connections it still holds
                    with contextlib.suppress(OSError):
                        loris.sendall(b"X-Drip: a\r\n")
        finally:
            for sock in held:
                sock.close()
        assert answers == {path: [200] * 14 for path in ("/healthz", "/readyz", "/metrics")}, answers
        exit_code, _ = stop(worker, 10)
    assert exit_code == 0


# --- SIGTERM -------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("event_loop", "runs_on"), [("auto", "uvloop"), ("asyncio", "asyncio")])
def test_sigterm_finishes_the_batch_saves_state_and_a_restart_posts_nothing_twice(
    llm: OpenAIHandle, tmp_path: Path, event_loop: str, runs_on: str
) -> None:
    """SIGTERM while a batch's scores are being posted: the post completes, the ledger records it, no
    further batch starts, exit 0 within ``shutdown_grace``. A second start scores the rest, re-posting
    nothing (Langfuse saw each score written exactly once). On either event loop (``[worker] event_loop``:
    uvloop by default, where it is installed)."""
    with start_langfuse(backlog(12), mode="thread") as langfuse:
        corpus = langfuse.corpus(ids="production")
        # Batches of 2 traces; each score post takes 1 s, so the worker is mostly posting.
        slow_posts(langfuse, 6, seconds=1.0)
        worker_settings = {"batch_size": 2, "shutdown_grace": "5s", "event_loop": event_loop}
        env = environment(langfuse, llm, worker=worker_settings)
        with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
            ops = Endpoints(worker)
            # A scripted fault is used up when its request arrives: 4 of 6 left = two posts are in the
            # stand-in, waiting out their second (the worker keeps two batches of a window in flight).
            eventually(lambda: langfuse.stats()["script_left"] <= 4, "two batches' posts in flight", worker)
            assert len(scored_traces(langfuse)) < 4
            assert ops.status("/readyz") == 200
            code, took = stop(worker, 10)
            log = worker.log()
        assert code == 0, log[-3000:]
        assert took < 5.0, f"exit took {took:.1f} s, longer than shutdown_grace"
        assert '"worker_stopping"' in log and '"worker_stop_timeout"' not in log
        assert [event["event_loop"] for event in log_events(log, "worker_started")] == [runs_on]
        first = scored_traces(langfuse)
        assert len(first) == 4, f"{len(first)} traces scored: the batch in flight should have finished, no more"

        # The state on disk: every trace whose scores arrived is in the ledger, nothing else is.
        state = StateStore(tmp_path / "state.db")
        try:
            ledger = state.scored_hashes(TARGET, corpus["trace_ids"])
        finally:
            state.close()
        assert set(ledger) == first

        # A second start scores the rest and posts nothing twice.
        langfuse.clear_faults()
        with WorkerProcess(["run"], env=env, workdir=tmp_path, log_name="worker2.log") as worker:
            eventually(lambda: len(scored_traces(langfuse)) == 12, "the rest scored after a restart", worker)
            exit_code, _ = stop(worker, 10)
        assert exit_code == 0
        summary = langfuse.score_summary()
        assert summary["stored"] == 12
        assert summary["overwrites"] == 0, summary
        assert summary["duplicate_count"] == 0, summary
        state = StateStore(tmp_path / "state.db")
        try:
            assert state.watermark(TARGET) is not None
            assert set(state.scored_hashes(TARGET, corpus["trace_ids"])) == scored_traces(langfuse)
        finally:
            state.close()
        assert langfuse.violations() == []


@pytest.mark.slow
def test_sigterm_during_a_hung_request_exits_0_when_the_grace_period_ends(
    llm: OpenAIHandle, tmp_path: Path
) -> None:
    """The batch in hand cannot finish (its Langfuse read hangs for 30 s): the worker waits
    ``shutdown_grace`` (2 s), cancels the tick and exits 0; what was scored before stays recorded."""
    with start_langfuse(backlog(4), mode="thread") as langfuse:
        env = environment(langfuse, llm, worker={"shutdown_grace": "2s"})
        with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
            Endpoints(worker)
            eventually(lambda: len(scored_traces(langfuse)) == 4, "the backlog scored", worker)
            langfuse.script_faults(ScriptedFault("latency", route="GET /api/public/v2/observations", seconds=30.0))
            eventually(lambda: langfuse.stats()["script_left"] == 0, "the next tick waiting on that read", worker)
            code, took = stop(worker, 10)
        # Exited (within stop()'s 10 s, long before the 30 s read), after the grace period ran out.
        assert code == 0, worker.log()[-3000:]
        assert took >= 2.0, f"exit took {took:.1f} s; shutdown_grace is 2 s"
        assert '"worker_stop_timeout"' in worker.log()
        state = StateStore(tmp_path / "state.db")
        try:
            assert set(state.scored_hashes(TARGET, list(scored_traces(langfuse)))) == scored_traces(langfuse)
        finally:
            state.close()


@pytest.mark.slow
def test_sigterm_while_waiting_for_langfuse_at_start_exits_0_at_once(llm: OpenAIHandle, tmp_path: Path) -> None:
    """Langfuse unreachable at start-up and its requests still being retried: SIGTERM must not wait for
    the retries to run out (here ~25 s, by default minutes) but exit 0 within the grace period."""
    placeholder = start_langfuse(backlog(1), mode="thread")
    placeholder.stop()
    env = environment(placeholder, llm, langfuse_url=f"http://127.0.0.1:{free_port()}")
    env["TRACE_SCORER_LANGFUSE"] = json.dumps(
        {**json.loads(env["TRACE_SCORER_LANGFUSE"]), "retry": {"initial": 0.5, "max": 0.5, "max_attempts": 50}}
    )
    with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
        ops = Endpoints(worker)
        eventually(lambda: value(ops.scrape(), "trace_scorer_langfuse_requests_total", status="connection_error") > 0,
                   "a refused connection counted", worker)
        assert ops.status("/readyz") == 503
        code, _ = stop(worker, 15)
    # Exited (code not None) within stop()'s 15 s, while the retries alone would take ~25 s more.
    assert code == 0, worker.log()[-3000:]

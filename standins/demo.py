"""The worker end to end on loopback, for a newcomer: ``.venv/bin/python -m standins.demo``.

It starts the Langfuse stand-in (playing a 4.16 server) holding generated production traces and a
dataset with two experiment runs, and the OpenAI-compatible stand-in as the judge; writes a settings
file with a production target (deterministic metrics and one judged metric) and a dataset-runs target;
runs ``trace-scorer run`` against them as a separate process with its ops endpoints on 127.0.0.1;
prints the worker's ticks and the scores Langfuse holds while they arrive; reads the scores back through
Langfuse's public API (``GET /api/public/v3/scores``); prints ``/readyz`` and a few ``/metrics`` lines;
then stops the worker with SIGTERM and exits 0. Bounded: a deadline (``--timeout``), a few dozen traces,
everything on 127.0.0.1, nothing read from outside the repository.

Runs from a checkout after the quick-start install (``pip install -e .``): the stand-ins need only the
project's own dependencies. Exit codes: 0 done, 1 the worker failed or the deadline passed (the worker's
log is printed), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from standins.faults import FaultConfig
from standins.generate import DatasetSpec, Scenario
from standins.handles import LangfuseHandle, OpenAIHandle, start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import LLM_KEY_VARIABLE, WorkerProcess, backlog_timing

#: The Langfuse the stand-in plays: 4.16 (v4 API, scores posted as ingestion events).
LANGFUSE_VERSION = "4.16.0"
DATASET = "agent-bench"
JUDGE_MODEL = "judge-a"
#: The judge's answer time and the provider's concurrency: slow enough that the scores are seen arriving.
JUDGE_LATENCY = 0.5
JUDGE_CONCURRENCY = 4
#: The metric lines of ``/metrics`` shown at the end (prefix match after ``trace_scorer_``).
METRIC_LINES = ("traces_scored_total", "scores_posted_total", "judge_calls_total", "ticks_total")
#: The worker's log events the demo prints as they come (besides ticks that did something).
SHOWN_EVENTS = ("langfuse_connected", "ops_server_started", "worker_started")

SETTINGS = """\
# Written by `python -m standins.demo`: the worker against the loopback stand-ins.
# Keys: LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY and {key_variable} in the environment, never here.

[log]
level = "INFO"
format = "json"            # the demo reads the worker's events from its log

[langfuse]
base_url = "{langfuse_url}"
  [langfuse.retry]
  initial = "0.2s"
  max = "2s"

[worker]
batch_size = 20            # small batches: scores reach Langfuse batch by batch, as you watch

[state]
path = "{state_path}"

[http]                     # /healthz, /readyz, /metrics
enabled = true
host = "127.0.0.1"
port = 0                   # the OS picks a free port; the worker logs it (ops_server_started)

[judge]
tracing = false            # judge calls are not recorded as Langfuse traces in the demo

[[providers]]              # the OpenAI-compatible stand-in plays the judge
name = "standin"
base_url = "{llm_url}/v1"
api_key_env = "{key_variable}"
chat_models = ["{judge_model}"]
max_concurrency = {judge_concurrency}

[[targets]]                # production traces
name = "production"
source = "traces"
interval = "2s"
lookback = "{lookback}"    # reaches back before the generated backlog
lag = "0s"
quiet_period = "1s"
  [targets.filter]
  environments = ["production"]   # not the experiments' traces (environment "sdk-experiment")
  [targets.references]     # the golden references the generator put in each root's metadata
  expected = ["$.trace.metadata.expected_answer"]
  reference_tool_calls = ["$.trace.metadata.expected_calls"]

  [[targets.metrics]]
  metric = "tool_call_accuracy"

  [[targets.metrics]]
  metric = "rouge"

  [[targets.metrics]]      # judged by the LLM stand-in
  metric = "aspect_critic"
  name = "polite"
  definition = "The final answer is polite and helpful."

[[targets]]                # experiments: the runs of a Langfuse dataset
name = "experiments"
source = "dataset_runs"
datasets = ["{dataset}"]
interval = "2s"
lookback = "30d"
quiet_period = "2s"

  [[targets.metrics]]
  metric = "tool_call_accuracy"

  [[targets.metrics]]
  metric = "rouge"
"""


def scenario(traces: int, items: int) -> Scenario:
    """``traces`` production traces 2 s apart ending three minutes ago (all have ended), golden references
    on each root, and one dataset of ``items`` items run twice (two experiments), one attempt each."""
    end = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0)
    return Scenario(
        seed=11,
        traces=traces,
        spacing=2.0,
        end=end.isoformat(),
        references_rate=1.0,
        datasets=(DatasetSpec(name=DATASET, items=items, runs=2, attempts=1),),
    )


def write_settings(workdir: Path, lf: LangfuseHandle, llm: OpenAIHandle, backlog: Scenario) -> Path:
    path = workdir / "settings.toml"
    path.write_text(
        SETTINGS.format(
            langfuse_url=lf.url,
            llm_url=llm.url,
            key_variable=LLM_KEY_VARIABLE,
            judge_model=JUDGE_MODEL,
            judge_concurrency=JUDGE_CONCURRENCY,
            state_path=(workdir / "trace-scorer.db").as_posix(),
            lookback=backlog_timing(backlog)["lookback"],
            dataset=DATASET,
        )
    )
    return path


def worker_env(lf: LangfuseHandle) -> dict[str, str]:
    """This environment without any ``TRACE_SCORER_*`` / ``LANGFUSE_*`` of the user's (they would override
    the settings file), plus the stand-ins' keys."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACE_SCORER_", "LANGFUSE_"))}
    env["LANGFUSE_PUBLIC_KEY"] = lf.public_key
    env["LANGFUSE_SECRET_KEY"] = lf.secret_key
    env[LLM_KEY_VARIABLE] = "sk-standin"
    return env


class Watch:
    """What the demo waits for: the subjects that must end up scored, and the worker's ticks."""

    def __init__(self, lf: LangfuseHandle, worker: WorkerProcess) -> None:
        self.lf = lf
        self.worker = worker
        self.production = set(lf.corpus(ids="production")["trace_ids"])
        items = lf.corpus(ids="experiments")["items"]
        self.experiment_traces = {item["traceId"] for item in items}
        self.runs = {item["experimentId"] for item in items}
        self._events_seen = 0

    def scored(self) -> tuple[set[str], set[str]]:
        """Trace ids and run ids with at least one score stored in Langfuse (the stand-in's store)."""
        traces: set[str] = set()
        runs: set[str] = set()
        for (subject, _name), _scores in self.lf.scores_by_subject().items():
            (runs if subject in self.runs else traces).add(subject.split("/", 1)[0])
        return traces, runs

    def new_events(self) -> list[dict[str, Any]]:
        """The worker's log events not shown yet that say what it does (:data:`SHOWN_EVENTS`; ticks that
        scored, posted or failed)."""
        events = self.worker.events()
        fresh, self._events_seen = events[self._events_seen :], len(events)
        return [
            e
            for e in fresh
            if e.get("event") in SHOWN_EVENTS
            or (e.get("event") == "tick" and (e.get("traces_scored") or e.get("scores_posted") or not e.get("ok")))
        ]

    def idle_after_work(self) -> bool:
        """Every target has scored something and its last tick found nothing more to do."""
        last: dict[str, dict[str, Any]] = {}
        worked: set[str] = set()
        for tick in self.worker.events("tick"):
            last[tick["target"]] = tick
            if tick.get("traces_scored", 0) or tick.get("runs_posted", 0):
                worked.add(tick["target"])
        return worked == {"production", "experiments"} and all(
            t.get("ok") and not t.get("traces_scored") and not t.get("traces_deferred") and not t.get("traces_failed")
            for t in last.values()
        )


def describe(event: dict[str, Any]) -> str:
    """One line for a worker event the demo shows."""
    name = event.get("event")
    if name == "langfuse_connected":
        return (
            f"connected to Langfuse {event.get('server_version')} at {event.get('base_url')}"
            f" (API {event.get('api_generation')}, scores via {event.get('score_posting')})"
        )
    if name == "ops_server_started":
        return f"serving /healthz, /readyz, /metrics on {event.get('host')}:{event.get('port')}"
    if name == "worker_started":
        return f"started, targets {', '.join(event.get('targets') or [])}"
    if name == "tick":
        return (
            f"tick {event['target']:<11} scored {event.get('traces_scored', 0):>3} traces,"
            f" posted {event.get('scores_posted', 0):>3} scores, {event.get('runs_posted', 0)} runs"
            f" ({event.get('langfuse_requests', 0)} Langfuse requests{'' if event.get('ok') else ', FAILED'})"
        )
    return str(event.get("event"))


def ops_port(worker: WorkerProcess) -> int | None:
    for event in worker.events("ops_server_started"):
        return int(event["port"])
    return None


def wait_for(condition: Callable[[], bool], worker: WorkerProcess, deadline: float, every: float = 0.5) -> bool:
    """Poll until ``condition()``, the worker exits, or the deadline passes (an interactive demo, not a test)."""
    while time.monotonic() < deadline and worker.running():
        if condition():
            return True
        time.sleep(every)
    return condition()


def read_back(lf: LangfuseHandle) -> list[dict[str, Any]]:
    """Every score, read as a user would: ``GET /api/public/v3/scores`` with the project's keys, page by page."""
    scores: list[dict[str, Any]] = []
    with httpx.Client(base_url=lf.url, auth=(lf.public_key, lf.secret_key), timeout=30.0) as client:
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": 100, "fields": "subject"}
            if cursor:
                params["cursor"] = cursor
            response = client.get("/api/public/v3/scores", params=params)
            response.raise_for_status()
            body = response.json()
            scores += body["data"]
            cursor = body["meta"].get("cursor")
            if not cursor:
                return scores


def summarise(scores: list[dict[str, Any]]) -> list[str]:
    by_name: dict[tuple[str, str], list[float]] = {}
    for score in scores:
        level = "run" if score["subject"]["kind"] == "experiment" else "trace"
        by_name.setdefault((score["name"], level), []).append(float(score.get("value") or 0.0))
    return [
        f"  {name:<22} {level:<6} {len(values):>4} scores, mean {sum(values) / len(values):.3f}"
        for (name, level), values in sorted(by_name.items())
    ]


def show_ops(port: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
        ready = client.get("/readyz")
        print(f"\nGET http://127.0.0.1:{port}/readyz → {ready.status_code}")
        for line in ready.text.strip().splitlines()[:8]:
            print(f"  {line}")
        metrics = client.get("/metrics")
        lines = metrics.text.splitlines()
        print(f"GET http://127.0.0.1:{port}/metrics → {metrics.status_code} (a few of its {len(lines)} lines)")
        for line in lines:
            if line.removeprefix("trace_scorer_").startswith(METRIC_LINES):
                print(f"  {line}")


def run(traces: int, items: int, timeout: float) -> int:
    started = time.monotonic()
    deadline = started + timeout
    backlog = scenario(traces, items)
    print(f"Starting the Langfuse stand-in ({LANGFUSE_VERSION}) and the OpenAI stand-in (the judge) on 127.0.0.1 …")
    options = LangfuseOptions(version=LANGFUSE_VERSION, scenario=backlog)
    with (
        start_langfuse(options, mode="process") as lf,
        start_openai(OpenAIOptions(faults=FaultConfig(latency=JUDGE_LATENCY)), mode="process") as llm,
        tempfile.TemporaryDirectory(prefix="trace-scorer-demo-") as scratch,
    ):
        workdir = Path(scratch)
        settings = write_settings(workdir, lf, llm, backlog)
        print(f"  Langfuse {lf.url}: {traces} production traces, dataset {DATASET!r} ({items} items, 2 runs)")
        print(
            f"  judge    {llm.url}/v1 (model {JUDGE_MODEL}, {JUDGE_LATENCY} s an answer, {JUDGE_CONCURRENCY} at a time)"
        )
        print(f"  settings {settings} (two targets: production, experiments)\n")
        print(f"$ trace-scorer run --config {settings.name}   (in {workdir}; log: worker.log)")
        worker = WorkerProcess(["run", "--config", str(settings)], env=worker_env(lf), workdir=workdir)
        with worker:
            watch = Watch(lf, worker)
            wanted = len(watch.production) + len(watch.experiment_traces)

            shown: dict[str, Any] = {"line": "", "at": 0.0}

            def progress() -> bool:
                for event in watch.new_events():
                    print(f"  worker  {describe(event)}")
                traces_done, runs_done = watch.scored()
                line = (
                    f"Langfuse holds scores for {len(traces_done & watch.production):>3}/{len(watch.production)}"
                    f" production traces, {len(traces_done & watch.experiment_traces):>3}/"
                    f"{len(watch.experiment_traces)} experiment traces, {len(runs_done)}/{len(watch.runs)} runs"
                )
                now = time.monotonic()
                if line != shown["line"] or now - shown["at"] >= 5:
                    print(f"  {now - started:5.1f} s  {line}")
                    shown.update(line=line, at=now)
                return (
                    len(traces_done & (watch.production | watch.experiment_traces)) == wanted
                    and runs_done == watch.runs
                    and watch.idle_after_work()
                )

            done = wait_for(progress, worker, deadline, every=1.0)
            why = "the worker exited by itself" if not worker.running() else "the deadline passed"
            port = ops_port(worker)
            if done and port is not None:
                scores = read_back(lf)
                print(f"\nRead back through GET {lf.url}/api/public/v3/scores: {len(scores)} scores")
                print("\n".join(summarise(scores)))
                for kind in ("trace", "experiment"):
                    score = next(s for s in scores if s["subject"]["kind"] == kind)
                    print(f"  e.g. {score['name']} = {score['value']:.3f} on {kind} {score['subject']['id']}")
                show_ops(port)
            print("\nStopping the worker (SIGTERM) …")
            code = worker.terminate(timeout=max(10.0, deadline - time.monotonic()))
            print(f"  worker exited with {code}")
            if not done or code != 0:
                print(f"\nThe demo did not finish ({why}); the worker's log:\n{worker.log()[-6000:]}", file=sys.stderr)
                return 1
        summary = lf.score_summary()
        print(
            f"\nDone in {time.monotonic() - started:.1f} s: {summary['stored']} scores stored,"
            f" {summary['duplicate_count']} duplicates; {lf.count('/api/public/ingestion')} score posts,"
            f" {llm.stats()['total_requests']} judge requests."
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m standins.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=30, help="production traces in the backlog (default 30)")
    parser.add_argument("--items", type=int, default=6, help="items of the dataset, run twice (default 6)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds (default 300)")
    args = parser.parse_args(argv)
    if not 1 <= args.traces <= 1000 or not 1 <= args.items <= 100 or args.timeout <= 0:
        parser.error("--traces 1..1000, --items 1..100, --timeout > 0")
    return run(args.traces, args.items, args.timeout)


if __name__ == "__main__":
    sys.exit(main())

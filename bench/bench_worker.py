"""Benchmark: ``trace-scorer run`` end to end against the loopback stand-ins (bench/README.md).

Five figures, each from runs of the real worker (``python -m trace_scorer run``, a separate process) against
the Langfuse stand-in and the OpenAI-compatible stand-in (each its own process too):

1. **Throughput** — ``--traces`` production traces (v4), two deterministic metrics (tool_call_accuracy,
   rouge, reading the golden references the generator puts on each root) and two LLM metrics
   (agent_goal_accuracy without a reference: two calls a trace; aspect_critic with a definition: one),
   Langfuse latency 20 ms, LLM latency 300 ms. Wall time from the start of the first tick to the end of
   the last tick that scored (every score posted and answered) against the bound
   LLM calls × latency ÷ the provider's ``max_concurrency``. Target ≤ 1.2×, on an idle machine and (``--hog``,
   a second run) with a busy-loop process (``python -c "while True: pass"``) holding one core. The worker's
   CPU (``/proc/<pid>/stat``, user + system) per scored trace: from the ``worker_started`` event to the
   end (the scoring, target ≤ 6 ms), and the start-up before it (imports, connection check) apart.
2. **Langfuse requests per 100 scored traces**, v4 (from run 1) and v3 (``--v3-traces`` of the same kind,
   same metrics, LLM latency 0: requests do not depend on it; v3 reads one trace a request, so a few
   hundred traces give its rate): reads and score posts. Target on v4: reads ≤ 5, posts ≤ 2.
3. **Memory** — peak RSS (``VmHWM``) of the worker working through a ``--memory-traces`` backlog with the
   deterministic metrics only; flat (the larger backlog does not raise it) and under 300 MB.
4. **The peer** — the same traces scored by the ``langfuse`` package's ``Langfuse.run_batched_evaluation``
   against the same stand-ins, with equivalent evaluators (each fetches its trace's observations, extracts
   the sample and runs the same four metric classes with the same judge) and equal concurrency: wall time
   and requests side by side.
5. **The peer under a plan limit** — both again on ``--hobby-traces`` traces, the Langfuse stand-in limited
   as Cloud Hobby is (30 requests a minute, counted in fixed windows, 429 with the rest of the window as
   Retry-After), the window ``--hobby-scale`` times shorter so the run stays short (default 10: 30 requests
   per 6 s; the LLM is not scaled): wall time, requests, 429s, scores stored, and the minutes of a Hobby
   budget (requests ÷ 30) each needs.

Run (about eleven minutes on a 2-core machine, five of them the 100,000-trace backlog, whose pace the
Langfuse stand-in sets; ``--skip memory`` leaves it out):

    PYTHONPATH=. python bench/bench_worker.py [--traces 2000] [--concurrency 32] [--batch-size 1000] [--hog]
        [--v3-traces 500] [--memory-traces 10000,100000] [--hobby-traces 300] [--hobby-scale 10]
        [--skip v3,memory,peer,hobby] [--json results.json] [--profile py-spy.txt] [--code DIR]
        [--scores-out scores.jsonl]

``--code DIR`` runs the worker from another copy of the package (the figures before a change, side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import OpenAIHandle, start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import (
    LLM_KEY_VARIABLE,
    PRODUCTION_REFERENCES,
    WorkerProcess,
    backlog_timing,
    production_target,
    worker_environment,
)

LANGFUSE_LATENCY = 0.02
#: Which v4 server the stand-in plays (``--v4-version``): 4.16.0 posts score events, 4.60.0 score lists.
V4_VERSION = "4.16.0"
#: The server the peer runs against: the ``langfuse`` package (5.x) posts score lists to ``POST /scores``,
#: which a 4.16 server refuses (400: it takes one object) — every score would be lost.
PEER_VERSION = "4.60.0"
LLM_LATENCY = 0.3
POLITE = {"metric": "aspect_critic", "name": "polite", "definition": "The final answer is polite and helpful."}
DETERMINISTIC: list[str | dict[str, Any]] = ["tool_call_accuracy", "rouge"]
#: A directory put first on the worker's PYTHONPATH (another copy of the package: figures before a change).
EXTRA_PYTHONPATH = ""

JUDGED: list[str | dict[str, Any]] = ["agent_goal_accuracy", POLITE]
#: Requests made once at start-up (connection check, generation probe, score configs): not per trace.
STARTUP_ROUTES = ("/health", "/projects", "/score-configs", "/experiments")
#: Where scores are sent: v4 ``POST /scores``, v3 (and the package's score queue) ``POST /ingestion``.
SCORE_ROUTES = ("POST /api/public/scores", "POST /api/public/ingestion")
#: Langfuse Cloud Hobby: 30 API requests a minute (fixed windows).
HOBBY_REQUESTS, HOBBY_WINDOW = 30, 60.0


def scenario_for(traces: int, seed: int = 7) -> Scenario:
    """A backlog 1 s apart whose last trace started three minutes ago (every trace has ended)."""
    end = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0)
    return Scenario(seed=seed, traces=traces, spacing=1.0, end=end.isoformat(), references_rate=1.0, datasets=())


def interpreter() -> str:
    """Which Python ran: its build changes every CPU figure (bench/README.md: Debian's optimised build ran
    the worker in ~20 % less CPU than pyenv's default build of the same minor version)."""
    return f"{platform.python_implementation()} {platform.python_version()}, {os.path.realpath(sys.executable)}"


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def busy_core(enabled: bool) -> Iterator[None]:
    """A busy-loop process holding one core for the block (``--hog``): the worker shares the machine."""
    if not enabled:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def wait_for_start(path: Path, pid_alive: Any, timeout: float = 120.0) -> None:
    """Until the worker logs ``worker_started`` (its start-up is over; the first tick begins)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive():
        if path.exists() and '"event": "worker_started"' in path.read_text(errors="replace"):
            return
        time.sleep(0.02)


class LogFollower:
    """Reads a worker's JSON log as it grows (never the whole file twice)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""
        self.ticks: list[dict[str, Any]] = []

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("r", errors="replace") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if '"event": "tick"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "tick":
                self.ticks.append(event)

    def seen(self) -> int:
        return sum(int(t["traces_seen"]) for t in self.ticks)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class WorkerRun:
    generation: str
    traces: int
    wall: float
    ticks: list[dict[str, Any]]
    summary: dict[str, Any]
    requests: dict[str, dict[str, int]]
    llm_requests: int
    peak_rss_mb: float
    worker_cpu: float
    standin_cpu: float
    #: Worker CPU seconds before ``worker_started`` (imports, connection check, score configs).
    startup_cpu: float = 0.0
    rate_limited: int = 0
    early: int = 0
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def scored(self) -> int:
        return sum(int(t["traces_scored"]) for t in self.ticks)

    @property
    def failed(self) -> int:
        """Traces whose scoring failed in some tick (retried later by the worker)."""
        return sum(int(t["traces_failed"]) for t in self.ticks)

    def reads(self) -> int:
        return _count(self.requests, "GET", exclude=STARTUP_ROUTES)

    def posts(self) -> int:
        return score_posts(self.requests)

    def cpu_ms_per_trace(self) -> float:
        """Worker CPU per scored trace while scoring (start-up apart), in milliseconds."""
        return 1000.0 * (self.worker_cpu - self.startup_cpu) / max(self.scored, 1)


def score_posts(requests: dict[str, dict[str, int]]) -> int:
    return sum(sum(outcomes.values()) for label, outcomes in requests.items() if label in SCORE_ROUTES)


def _count(requests: dict[str, dict[str, int]], method: str, exclude: Sequence[str] = ()) -> int:
    total = 0
    for label, outcomes in requests.items():
        verb, path = label.split(" ", 1)
        if verb == method and not any(path.endswith(part) or f"{part}/" in path for part in exclude):
            total += sum(outcomes.values())
    return total


def run_worker(
    *,
    generation: str,
    traces: int,
    metrics: list[str | dict[str, Any]],
    llm_latency: float | None,
    worker_settings: dict[str, Any],
    llm_concurrency: int,
    timeout: float,
    label: str,
    faults: FaultConfig | None = None,
    hog: bool = False,
    version: str | None = None,
    target_options: dict[str, Any] | None = None,
    profile: Path | None = None,
    scores_out: Path | None = None,
) -> WorkerRun:
    """One worker over a fresh backlog on fresh stand-ins; returns when every trace was seen by a tick.

    ``faults``: the Langfuse stand-in's (default: its latency only); ``hog``: a core kept busy meanwhile;
    ``version``: the server it plays (default ``V4_VERSION`` on v4, 3.120.0 on v3); ``scores_out``: every score
    the stand-in stored, written there (:func:`write_scores`), its details kept."""
    scenario = scenario_for(traces)
    options = LangfuseOptions(
        version=version or (V4_VERSION if generation == "v4" else "3.120.0"),
        scenario=scenario,
        faults=faults or FaultConfig(latency=LANGFUSE_LATENCY),
        validate_answers="sample",  # the package's model parser is too slow for every row of 100,000 traces
        keep_score_details=scores_out is not None,
    )
    llm: OpenAIHandle | None = None
    with start_langfuse(options, mode="process") as lf, busy_core(hog):
        if llm_latency is not None:
            llm = start_openai(OpenAIOptions(profile="openai", faults=FaultConfig(latency=llm_latency)), mode="process")
        try:
            target = production_target(
                metrics, references=PRODUCTION_REFERENCES, **backlog_timing(scenario), **(target_options or {})
            )
            env = worker_environment(
                lf,
                llm,
                targets=[target],
                llm_concurrency=llm_concurrency,
                worker_settings=worker_settings,
                langfuse_settings={"api_generation": generation},
            )
            if EXTRA_PYTHONPATH:
                env["PYTHONPATH"] = os.pathsep.join([EXTRA_PYTHONPATH, env["PYTHONPATH"]])
            workdir = Path(tempfile.mkdtemp(prefix=f"bench-{label}-"))
            with WorkerProcess(["run"], env=env, workdir=workdir) as worker:
                wait_for_start(worker.log_path, worker.running)
                startup_cpu = cpu_seconds(worker.pid)
                spy = None
                if profile is not None:  # py-spy (pip install py-spy), from the end of start-up on
                    spy = subprocess.Popen(
                        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(worker.pid),
                         "--rate", "200", "--format", "raw", "--output", str(profile)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )  # fmt: skip
                follower = LogFollower(worker.log_path)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and worker.running():
                    follower.poll()
                    if follower.seen() >= traces:
                        break
                    time.sleep(0.5)
                follower.poll()
                if follower.seen() < traces:
                    raise RuntimeError(f"{label}: {follower.seen()} of {traces} traces seen\n{worker.log()[-3000:]}")
                worker_cpu = cpu_seconds(worker.pid)
                peak = worker.peak_rss_mb
                if spy is not None:
                    spy.send_signal(signal.SIGINT)
                    spy.wait(timeout=60)
                standin_cpu = cpu_seconds(getattr(lf, "pid", 0))
                worker.terminate()
            working = [t for t in follower.ticks if t["traces_seen"]]
            first, last = working[0], working[-1]
            started = _time(first["timestamp"]) - timedelta(seconds=float(first["duration_seconds"]))
            wall = (_time(last["timestamp"]) - started).total_seconds()
            violations = lf.violations()
            if violations:
                raise RuntimeError(f"{label}: contract violations: {violations[:5]}")
            if scores_out is not None:
                digest = write_scores(lf.scores(), scores_out)
                print(f"{label}: stored scores to {scores_out}, sha256 {digest}", file=sys.stderr, flush=True)
            return WorkerRun(
                generation=generation,
                traces=traces,
                wall=wall,
                ticks=working,
                summary=lf.score_summary(),
                requests=lf.request_counts(),
                llm_requests=int(llm.stats()["total_requests"]) if llm is not None else 0,
                peak_rss_mb=peak,
                worker_cpu=worker_cpu,
                standin_cpu=standin_cpu,
                startup_cpu=startup_cpu,
                rate_limited=len(lf.rate_limited()),
                early=len(lf.early_requests()),
                settings={**worker_settings, "llm_concurrency": llm_concurrency},
            )
        finally:
            if llm is not None:
                llm.stop()


#: What differs between two runs of the same code: when the stand-in received a score, how often, and the
#: score's timestamp (the trace's time, which follows the run's start).
_RUN_FIELDS = frozenset({"timestamp", "_via", "_writes", "_firstReceived", "_lastReceived"})


def write_scores(scores: list[dict[str, Any]], path: Path) -> str:
    """The stored scores as sorted JSON lines without what differs between runs (:data:`_RUN_FIELDS`), to
    ``path``; returns their sha256: two codes that score alike give the same file (``--scores-out``)."""
    lines = sorted(
        json.dumps({k: v for k, v in score.items() if k not in _RUN_FIELDS}, sort_keys=True) for score in scores
    )
    text = "".join(f"{line}\n" for line in lines)
    path.write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


# --- the peer: the langfuse package's own batch evaluation ---------------------------------------------


@dataclass
class PeerRun:
    wall: float
    summary: dict[str, Any]
    requests: dict[str, dict[str, int]]
    llm_requests: int
    fetched: int
    processed: int
    scores_created: int
    failed: int = 0
    rate_limited: int = 0
    early: int = 0


def run_peer(traces: int, concurrency: int, fetch_batch_size: int, faults: FaultConfig | None = None) -> PeerRun:
    """``Langfuse.run_batched_evaluation`` over the root observations, evaluators doing what the worker
    does per trace: fetch the trace's observations, extract the sample, run the four metrics.

    ``faults``: the Langfuse stand-in's (default: its latency only)."""
    from langfuse import Langfuse
    from langfuse.batch_evaluation import BatchEvaluationResult, BatchEvaluationRunner, EvaluatorInputs
    from langfuse.experiment import Evaluation

    from trace_scorer.config.settings import Settings
    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.extract import extract_sample
    from trace_scorer.judge import build_judge
    from trace_scorer.langfuse.reads.v4 import BODY_FIELDS
    from trace_scorer.metrics.base import Resources, Score
    from trace_scorer.scoring.pipeline import Pipeline
    from trace_scorer.scoring.plan import build_plan

    scenario = scenario_for(traces)
    options = LangfuseOptions(
        version=PEER_VERSION,
        scenario=scenario,
        faults=faults or FaultConfig(latency=LANGFUSE_LATENCY),
        validate_answers="sample",
        keep_score_details=False,
        # The package keeps one client per public key per process (its base URL included): a second peer
        # run with the same key would talk to the first run's stopped stand-in.
        public_key=f"pk-lf-peer-{uuid.uuid4().hex[:12]}",
    )
    with (
        start_langfuse(options, mode="process") as lf,
        start_openai(OpenAIOptions(profile="openai", faults=FaultConfig(latency=LLM_LATENCY)), mode="process") as llm,
    ):
        env = worker_environment(lf, llm, llm_concurrency=concurrency, inherit=False)
        target = TargetSettings.model_validate(
            production_target([*DETERMINISTIC, *JUDGED], references=PRODUCTION_REFERENCES)
        )
        settings = Settings(
            providers=json.loads(env["TRACE_SCORER_PROVIDERS"]),
            judge=json.loads(env["TRACE_SCORER_JUDGE"]),
            targets=[target],
        )
        os.environ[LLM_KEY_VARIABLE] = env[LLM_KEY_VARIABLE]
        client = Langfuse(public_key=lf.public_key, secret_key=lf.secret_key, base_url=lf.url)
        state: dict[str, Any] = {}

        def pipeline() -> Pipeline:
            """Built inside the evaluation's event loop (the judge's HTTP client belongs to it)."""
            if "pipeline" not in state:
                judge = state["judge"] = build_judge(settings, tracing_default=False)
                state["pipeline"] = Pipeline(build_plan(target, index=0, resources=Resources(judge=judge)))
            return state["pipeline"]  # type: ignore[no-any-return]

        def mapper(*, item: Any, **_: Any) -> EvaluatorInputs:
            return EvaluatorInputs(
                input=item.input,
                output=item.output,
                expected_output=None,
                metadata={"trace_id": item.trace_id, "start": item.start_time},
            )

        async def trace_metrics(*, metadata: Any = None, **_: Any) -> list[Evaluation]:
            trace_id, start = metadata["trace_id"], metadata["start"]
            page = await client.async_api.observations.get_many(
                trace_id=trace_id,
                fields=BODY_FIELDS,
                from_start_time=start - timedelta(minutes=5),
                to_start_time=start + timedelta(minutes=10),
                limit=1000,
            )
            rows = [json.loads(row.json()) for row in page.data]
            sample = extract_sample(rows, references=target.references, trace_id=trace_id)
            result = await pipeline().score_sample(sample)
            return [
                Evaluation(name=name, value=outcome.value, comment=outcome.comment or None)
                for name, outcome in result.outcomes.items()
                if isinstance(outcome, Score)
            ]

        roots = json.dumps(
            [
                {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True},
                {"type": "stringOptions", "column": "environment", "operator": "any of", "value": ["production"]},
            ]
        )
        started = time.monotonic()
        try:

            async def evaluate() -> BatchEvaluationResult:
                """What ``client.run_batched_evaluation`` runs (its runner, on an event loop of its own), and
                then the judge closed on that loop (its HTTP connections belong to it)."""
                try:
                    return await BatchEvaluationRunner(client).run_async(
                        mapper=mapper,
                        evaluators=[trace_metrics],
                        filter=roots,
                        fetch_batch_size=fetch_batch_size,
                        max_concurrency=concurrency,
                    )
                finally:
                    if "pipeline" in state:
                        await state["judge"].aclose()

            result = asyncio.run(evaluate())
            client.flush()
        finally:
            client.shutdown()
        wall = time.monotonic() - started
        return PeerRun(
            wall=wall,
            summary=lf.score_summary(),
            requests=lf.request_counts(),
            llm_requests=int(llm.stats()["total_requests"]),
            fetched=result.total_items_fetched,
            processed=result.total_items_processed,
            scores_created=result.total_scores_created,
            failed=result.total_items_failed,
            rate_limited=len(lf.rate_limited()),
            early=len(lf.early_requests()),
        )


# --- the report ----------------------------------------------------------------------------------------


def per_100(count: int, traces: int) -> float:
    return 100.0 * count / max(traces, 1)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def yes(ok: bool) -> str:
    return "**yes**" if ok else "**no**"


def throughput_rows(label: str, run: WorkerRun, concurrency: int) -> list[list[Any]]:
    """The throughput figures of one run: wall time against the bound, traces per second, CPU per trace."""
    bound = run.llm_requests * LLM_LATENCY / concurrency
    ratio = run.wall / bound
    cpu = run.cpu_ms_per_trace()
    return [
        [
            f"throughput{label}: wall time, first tick → last score stored",
            f"{run.wall:.1f} s",
            f"bound {run.llm_requests} LLM calls × {LLM_LATENCY} s ÷ {concurrency} = {bound:.1f} s; **{ratio:.2f}×**",
            "≤ 1.2×",
            yes(ratio <= 1.2),
        ],
        [
            f"throughput{label}: worker CPU per scored trace",
            f"**{cpu:.2f} ms**",
            f"{run.worker_cpu - run.startup_cpu:.1f} s while scoring {run.scored} traces; start-up apart "
            f"{run.startup_cpu:.1f} s (with it {1000 * run.worker_cpu / max(run.scored, 1):.2f} ms a trace); "
            f"{run.scored / run.wall:.1f} traces/s, {run.llm_requests / max(run.scored, 1):.2f} LLM calls a trace",
            "≤ 6 ms",
            yes(cpu <= 6.0),
        ],
    ]


def hobby_table(worker: WorkerRun, peer: PeerRun, traces: int, scale: float) -> str:
    """trace-scorer and the peer side by side against the plan-limited stand-in."""

    def requests(counts: dict[str, dict[str, int]]) -> tuple[int, int]:
        every = sum(sum(outcomes.values()) for outcomes in counts.values())
        return every, _count(counts, "GET", exclude=STARTUP_ROUTES) + score_posts(counts)

    w_all, w_work = requests(worker.requests)
    p_all, p_work = requests(peer.requests)
    return table(
        [
            ["wall time (window scaled)", f"{worker.wall:.1f} s", f"{peer.wall:.1f} s"],
            ["Langfuse requests in all (start-up included)", w_all, p_all],
            [
                "reads + score posts per 100 traces",
                f"{per_100(w_work, traces):.1f}",
                f"{per_100(p_work, traces):.1f}",
            ],
            ["answered 429 (plan limit)", worker.rate_limited, peer.rate_limited],
            ["retries before their Retry-After", worker.early, peer.early],
            [
                f"Hobby budget used (requests ÷ {HOBBY_REQUESTS} a minute)",
                f"{w_all / HOBBY_REQUESTS:.1f} min",
                f"{p_all / HOBBY_REQUESTS:.1f} min",
            ],
            ["traces scored / failed", f"{worker.scored} / {worker.failed}", f"{peer.processed} / {peer.failed}"],
            ["scores stored", worker.summary["stored"], peer.summary["stored"]],
        ],
        [
            f"{traces} traces, {HOBBY_REQUESTS} requests per {HOBBY_WINDOW / scale:g} s window",
            "trace-scorer run",
            "run_batched_evaluation",
        ],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32, help="provider max_concurrency = worker.concurrency")
    parser.add_argument("--batch-size", type=int, default=1000, help="worker.batch_size")
    parser.add_argument("--hog", action="store_true", help="run the throughput scenario again with one core kept busy")
    parser.add_argument("--v3-traces", type=int, default=500, help="v3 reads one trace a request: fewer suffice")
    parser.add_argument("--memory-traces", default="10000,100000")
    parser.add_argument("--hobby-traces", type=int, default=300, help="traces of the plan-limit scenario")
    parser.add_argument(
        "--hobby-scale", type=float, default=10.0, help="Hobby's 60 s window is this many times shorter here"
    )
    parser.add_argument("--skip", default="", help="comma-separated: v3, memory, peer, hobby")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument(
        "--profile", type=Path, help="py-spy (raw, 200 Hz) of the throughput run's worker after start-up, to this file"
    )
    parser.add_argument("--v4-version", default="4.16.0", help="the v4 server the stand-in plays (4.16.0, 4.60.0)")
    parser.add_argument("--code", help="a directory holding another trace_scorer package to run")
    parser.add_argument(
        "--scores-out", type=Path, help="the throughput run's stored scores as sorted JSON lines, to compare two codes"
    )
    args = parser.parse_args(argv)
    global EXTRA_PYTHONPATH
    if args.code:
        EXTRA_PYTHONPATH = str(Path(args.code).resolve())
    global V4_VERSION
    V4_VERSION = args.v4_version
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    settings = {"concurrency": args.concurrency, "batch_size": args.batch_size}
    out: dict[str, Any] = {"traces": args.traces, "settings": settings}
    started = time.monotonic()

    def note(text: str) -> None:
        print(f"[{time.monotonic() - started:6.0f} s] {text}", file=sys.stderr, flush=True)

    def throughput(hog: bool) -> WorkerRun:
        return run_worker(
            generation="v4",
            traces=args.traces,
            metrics=[*DETERMINISTIC, *JUDGED],
            llm_latency=LLM_LATENCY,
            worker_settings=settings,
            llm_concurrency=args.concurrency,
            timeout=1200,
            label="throughput-hog" if hog else "throughput",
            hog=hog,
            profile=None if hog else args.profile,
            scores_out=None if hog else args.scores_out,
        )

    note(f"throughput: {args.traces} traces on v4, 4 metrics, LLM {LLM_LATENCY * 1000:.0f} ms")
    v4 = throughput(hog=False)
    out["throughput"] = {**v4.__dict__, "cpu_ms_per_trace": v4.cpu_ms_per_trace()}
    hogged: WorkerRun | None = None
    if args.hog:
        note("throughput again, a busy-loop process holding one core")
        hogged = throughput(hog=True)
        out["throughput_hog"] = {**hogged.__dict__, "cpu_ms_per_trace": hogged.cpu_ms_per_trace()}
    by_name = v4.summary["by_name"]
    names = ["tool_call_accuracy", "rouge", "agent_goal_accuracy", "polite"]
    runs: list[tuple[str, WorkerRun]] = [("v4", v4)]

    if "v3" not in skip:
        note(f"requests: {args.v3_traces} traces on v3 (LLM latency 0)")
        v3 = run_worker(
            generation="v3",
            traces=args.v3_traces,
            metrics=[*DETERMINISTIC, *JUDGED],
            llm_latency=0.0,
            worker_settings=settings,
            llm_concurrency=args.concurrency,
            timeout=1200,
            label="v3",
        )
        out["v3"] = v3.__dict__
        runs.append(("v3", v3))

    memory: list[WorkerRun] = []
    if "memory" not in skip:
        for size in [int(s) for s in args.memory_traces.split(",") if s]:
            note(f"memory: {size} traces backlog, deterministic metrics")
            memory.append(
                run_worker(
                    generation="v4",
                    traces=size,
                    metrics=DETERMINISTIC,
                    llm_latency=None,
                    worker_settings={"batch_size": args.batch_size},
                    llm_concurrency=args.concurrency,
                    timeout=3600,
                    label=f"memory-{size}",
                )
            )
        out["memory"] = [m.__dict__ for m in memory]

    peer: PeerRun | None = None
    if "peer" not in skip:
        note(f"peer: run_batched_evaluation over the same {args.traces} traces, max_concurrency {args.concurrency}")
        peer = run_peer(args.traces, args.concurrency, fetch_batch_size=100)
        out["peer"] = peer.__dict__

    hobby: tuple[WorkerRun, PeerRun] | None = None
    if "hobby" not in skip:
        window = HOBBY_WINDOW / args.hobby_scale
        limit = FaultConfig(latency=LANGFUSE_LATENCY, requests_per_window=HOBBY_REQUESTS, window_seconds=window)
        note(f"plan limit: {args.hobby_traces} traces, {HOBBY_REQUESTS} requests per {window:g} s; trace-scorer")
        limited = run_worker(
            generation="v4",
            traces=args.hobby_traces,
            metrics=[*DETERMINISTIC, *JUDGED],
            llm_latency=LLM_LATENCY,
            worker_settings=settings,
            llm_concurrency=args.concurrency,
            timeout=1800,
            label="hobby",
            faults=limit,
            version=PEER_VERSION,  # the peer's server: both post score lists to POST /scores
        )
        note("plan limit: run_batched_evaluation")
        limited_peer = run_peer(args.hobby_traces, args.concurrency, fetch_batch_size=100, faults=limit)
        hobby = (limited, limited_peer)
        out["hobby"] = {"scale": args.hobby_scale, "worker": limited.__dict__, "peer": limited_peer.__dict__}
    note("done")

    # --- print -----------------------------------------------------------------------------------
    print(f"\n## trace-scorer run against the stand-ins ({args.traces} production traces)\n")
    print(
        f"Settings: worker.concurrency = provider max_concurrency = {args.concurrency}, "
        f"worker.batch_size = {args.batch_size}; Langfuse {LANGFUSE_LATENCY * 1000:.0f} ms, "
        f"LLM {LLM_LATENCY * 1000:.0f} ms a request.\n"
    )
    print(f"Interpreter (the worker's too): {interpreter()}\n")
    print("Scores per metric (a metric with nothing to compare is skipped, not posted):\n")
    print(
        table(
            [[n, by_name.get(n, 0), args.traces - by_name.get(n, 0)] for n in names],
            ["metric", "scored", "skipped"],
        )
    )
    print()
    rows: list[list[Any]] = throughput_rows("", v4, args.concurrency)
    if hogged is not None:
        rows += throughput_rows(" (one core busy)", hogged, args.concurrency)
    for generation, run in runs:
        reads, posts = per_100(run.reads(), run.scored), per_100(run.posts(), run.scored)
        target = "reads ≤ 5, posts ≤ 2" if generation == "v4" else "(none)"
        met = yes(reads <= 5 and posts <= 2) if generation == "v4" else ""
        rows.append(
            [
                f"Langfuse requests per 100 scored traces, {generation}",
                f"reads {reads:.2f}, score posts {posts:.2f}",
                f"{run.reads()} reads, {run.posts()} posts for {run.scored} traces ({run.summary['stored']} scores)",
                target,
                met,
            ]
        )
    if memory:
        peaks = [m.peak_rss_mb for m in memory]
        flat = max(peaks) - min(peaks) <= 0.1 * min(peaks)
        for m in memory:
            rows.append(
                [
                    f"memory: peak RSS, {m.traces:,} trace backlog",
                    f"{m.peak_rss_mb:.0f} MB",
                    f"{m.wall:.0f} s, {m.scored / m.wall:.0f} traces/s, {len(m.ticks)} windows",
                    "< 300 MB, flat",
                    yes(m.peak_rss_mb < 300 and flat),
                ]
            )
    print(table(rows, ["figure", "value", "how", "target", "met"]))
    if peer is not None:
        print(
            f"\nThe peer, same traces, same stand-ins (the peer's a {PEER_VERSION} server: its package posts score "
            "lists), equal concurrency:\n"
        )
        peer_reads = _count(peer.requests, "GET", exclude=STARTUP_ROUTES)
        peer_posts = score_posts(peer.requests)
        print(
            table(
                [
                    ["wall time", f"{v4.wall:.1f} s", f"{peer.wall:.1f} s"],
                    ["LLM calls", v4.llm_requests, peer.llm_requests],
                    ["Langfuse reads", v4.reads(), peer_reads],
                    ["Langfuse score posts", v4.posts(), peer_posts],
                    ["items read / evaluated", f"{v4.scored} traces", f"{peer.fetched} rows / {peer.processed}"],
                    ["scores stored", v4.summary["stored"], peer.summary["stored"]],
                    ["(subject, name) held twice", v4.summary["duplicate_count"], peer.summary["duplicate_count"]],
                    ["score subject", "trace", "root observation"],
                    ["ids / a re-run", "deterministic: overwrites", "random: adds"],
                ],
                ["", "trace-scorer run", "run_batched_evaluation"],
            )
        )
        print(f"\nPeer requests by route: {json.dumps(peer.requests)}")
    if hobby is not None:
        limited, limited_peer = hobby
        print(
            f"\nUnder Cloud Hobby's plan limit ({HOBBY_REQUESTS} requests a minute, fixed windows, 429 with the rest "
            f"of the window as Retry-After), the window {args.hobby_scale:g}× shorter (the LLM is not scaled), "
            f"both against a {PEER_VERSION} server:\n"
        )
        print(hobby_table(limited, limited_peer, args.hobby_traces, args.hobby_scale))
        print(f"\ntrace-scorer requests by route: {json.dumps(limited.requests)}")
        print(f"Peer requests by route: {json.dumps(limited_peer.requests)}")
    print(f"\nWorker requests by route (v4): {json.dumps(v4.requests)}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

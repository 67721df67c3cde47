"""Benchmark: issue #29 item 1 — how soon after a trace's end its deterministic scores can be read.

The real worker (``python -m trace_scorer run``, its own process) with the **shipped timing defaults**
(``interval``, ``lag``, ``quiet_period`` not set) against the Langfuse stand-in playing 4.16.0 (its own
process; rows visible only once their span ended, OTel-style), with live traffic: ``--rates`` traces a
second start in real time for ``--seconds``. Ingestion delay, varied: each observation's rows are visible
``--export-delay`` + up to ``--jitter`` seconds (uniform, drawn per observation) after its span ended, and
``--late-rate`` of the child observations ``--late-delay`` seconds later still, so a child is sometimes
visible after its root.

Per rate it prints:

- freshness: seconds from a root's end to the moment the last of its trace's scores was stored (the
  stand-in stores a score when it accepts it, so that is when ``GET /v3/scores`` can read it): p50, p95,
  max, over the traces that ended after ``--warmup`` seconds of traffic; traces never scored by
  ``--drain`` seconds after the traffic ended are **missed**;
- reads per 100 traces in the steady state (every ``GET`` from the end of the warm-up to the last trace's
  end, per trace ending then; score posts apart), and reads per minute while idle (``--idle`` seconds from
  ``--settle`` seconds after the traffic, once no sweep can see it);
- whether late children were read: for every trace with a row visible after its root's (and up to
  ``--check`` others), the rows are read back from the stand-in once all are visible, scored locally with the
  same metrics, and the values compared with those posted ("complete" = all equal); how many traces had
  their scores written again (scored again once a late child was read: an overwrite, same ids) and, for
  those, p95 and max from the root's end to the last write;
- the worker's CPU per scored trace (user + system, during the traffic and drain);
- the steady state's observation reads by kind (``reads_by_kind``), seen by a recording proxy between the
  worker and the stand-in: root listings (pages), rows by trace id (requests; their ids split into traces
  asked for the first time and traces read again, and the rows they returned), one trace by ``traceId``,
  and any other ``GET``.

``--code DIR`` runs the worker from another copy of the package (``git archive main trace_scorer | tar -x -C
DIR``): the figures of that code with *its* defaults. ``--interval`` sets the target's interval (the
trade-off between reads and freshness; default: the shipped one).

    PYTHONPATH=. python bench/bench_freshness.py [--rates 1,10,100] [--seconds 120] [--code DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_worker import cpu_seconds, wait_for_start
from standins.faults import FaultConfig
from standins.generate import Corpus, Scenario
from standins.handles import LangfuseHandle, start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import PRODUCTION_REFERENCES, WorkerProcess, worker_environment
from trace_scorer.api.scoring import score
from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract import extract_sample

METRICS = ["tool_call_accuracy", "rouge"]
KPIS = [{"name": "quality", "formula": "weighted_sum", "weights": {"tool_call_accuracy": 0.6, "rouge": 0.4}}]
OBSERVATIONS = "GET /api/public/v2/observations"


@dataclass
class Result:
    code: str
    rate: float
    traces_started: int = 0
    measured: int = 0
    missed: int = 0
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0
    reads_live: int = 0
    traces_steady: int = 0
    scored_live: int = 0
    reads_per_100: float = 0.0
    reads_per_minute_idle: float = 0.0
    posts_per_100: float = 0.0
    late_traces: int = 0
    late_complete: int = 0
    #: Traces whose scores were written again (an overwrite: scored again once a late child was read).
    rescored: int = 0
    #: From a root's end to its trace's scores as they stayed (the last write), over the rescored traces.
    rescored_p95: float = 0.0
    rescored_max: float = 0.0
    #: Traces whose first scoring posted only some of their scores (a metric skipped for lack of rows not
    #: visible yet; the rest came with the re-read): their freshness is the re-read's.
    first_partial: int = 0
    checked: int = 0
    checked_complete: int = 0
    cpu_ms_per_trace: float = 0.0
    #: The stand-in's CPU over the traffic and drain, in cores (1.0: one core busy all the time).
    standin_cpu_share: float = 0.0
    longest_tick: float = 0.0
    duplicates: int = 0
    #: The steady state's observation reads by kind (:class:`RecordingProxy`), and per 100 traces.
    reads_by_kind: dict[str, int] = field(default_factory=dict)
    reads_by_kind_per_100: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


#: Response headers not handed on by the proxy (aiohttp sets its own).
HOP_HEADERS = {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive"}


class RecordingProxy:
    """A forwarding proxy in its own thread that notes what each observation read asked for: its kind,
    the trace ids of a ``traceId any of`` read (new or asked for before) and how many rows came back."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.log: list[tuple[float, str, int, int, int]] = []  # (monotonic time, kind, new ids, again, rows)
        self._asked: set[str] = set()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.url = ""
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64), auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body or None, headers=headers
        ) as answer:
            data = await answer.read()
            status = answer.status
            out = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        if request.method == "GET":
            self._note(request.path_qs, status, data)
        return web.Response(status=status, body=data, headers=out)

    def _note(self, path_qs: str, status: int, data: bytes) -> None:
        url = urlsplit(path_qs)
        if url.path != "/api/public/v2/observations":
            kind, new, again, rows = f"GET {url.path}", 0, 0, 0
        else:
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            conditions = json.loads(query.get("filter") or "[]")
            ids = next((c["value"] for c in conditions if c.get("column") == "traceId"), None)
            rows = len(json.loads(data).get("data") or []) if status == 200 else 0
            new = again = 0
            if ids is None and (
                query.get("isRootObservation") == "true"
                or any(c.get("column") == "isRootObservation" and c.get("value") is True for c in conditions)
            ):
                kind = "listing"
            elif ids is not None:
                kind = "rows by id"
                with self._lock:
                    again = sum(1 for i in ids if i in self._asked)
                    new = len(ids) - again
                    self._asked.update(ids)
            elif "traceId" in query:
                kind = "one trace"
            else:
                kind = "window scan"
            if status != 200:
                kind += f" {status}"
        with self._lock:
            self.log.append((time.monotonic(), kind, new, again, rows))

    def breakdown(self, since: float, until: float) -> dict[str, Any]:
        """Requests by kind between two ``time.monotonic()`` marks; ids and rows of the id reads."""
        with self._lock:
            entries = [e for e in self.log if since <= e[0] < until]
        kinds = Counter(kind for _, kind, _, _, _ in entries)
        by_id = [e for e in entries if e[1] == "rows by id"]
        return {
            **dict(sorted(kinds.items())),
            "ids new": sum(e[2] for e in by_id),
            "ids again": sum(e[3] for e in by_id),
            "rows by id (rows)": sum(e[4] for e in by_id),
            "listing (rows)": sum(e[4] for e in entries if e[1] == "listing"),
        }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def reads(lf: LangfuseHandle) -> int:
    return sum(sum(o.values()) for label, o in lf.request_counts().items() if label.startswith("GET "))


def posts(lf: LangfuseHandle) -> int:
    return sum(sum(o.values()) for label, o in lf.request_counts().items() if label.startswith("POST "))


def run(rate: float, args: argparse.Namespace) -> Result:
    result = Result(args.code or "this checkout", rate)
    live = int(rate * args.seconds)
    start_at = datetime.now(UTC) + timedelta(seconds=20)  # the worker's start-up
    scenario = Scenario(
        seed=29,
        traces=1,
        live=live,
        spacing=1.0 / rate,
        end=start_at.isoformat(),
        datasets=(),
        references_rate=1.0,
        duplicate_rate=0.2,
        ingest_jitter=args.jitter,
        late_rate=args.late_rate,
        late_delay=args.late_delay,
    )
    options = LangfuseOptions(
        version="4.16.0",
        scenario=scenario,
        export_delay=args.export_delay,
        faults=FaultConfig(latency=args.latency),
        validate_answers="sample",
        keep_score_details=False,
    )
    corpus = Corpus(scenario, span_end_visibility=True, export_delay=args.export_delay)
    result.traces_started = live
    target = {
        "name": "production",
        "source": "traces",
        "metrics": [{"metric": m} for m in METRICS],
        "kpis": KPIS,
        "references": PRODUCTION_REFERENCES,
    }
    if args.interval:
        target["interval"] = args.interval
        result.notes.append(f"interval {args.interval}")
    with start_langfuse(options, mode="process") as lf, RecordingProxy(lf.url) as proxy:
        env = worker_environment(
            lf, None, targets=[target], langfuse_settings={"api_generation": "v4", "base_url": proxy.url}
        )
        env["LANGFUSE_BASE_URL"] = proxy.url
        if args.code:
            env["PYTHONPATH"] = os.pathsep.join([str(Path(args.code).resolve()), env["PYTHONPATH"]])
        workdir = Path(tempfile.mkdtemp(prefix="bench-freshness-"))
        with WorkerProcess(["run"], env=env, workdir=workdir) as worker:
            wait_for_start(worker.log_path, worker.running)
            pid = worker.process.pid
            standin = int(getattr(lf, "pid", 0))
            cpu0, posts0, standin0, wall0 = cpu_seconds(pid), posts(lf), cpu_seconds(standin), time.monotonic()
            headers = [corpus.production.header(i) for i in range(1, 1 + live)]
            rendered = {h.trace_id: corpus.render(h) for h in headers}
            warm = start_at + timedelta(seconds=args.warmup)
            traffic_end = max(r.end for r in rendered.values())
            visible_end = max(rec.visible_final for r in rendered.values() for rec in r.records)
            drain_until = visible_end + timedelta(seconds=args.drain)
            # Reads in the steady state: from the warm-up's end to the last trace's end.
            marks: dict[str, int] = {}
            clock: dict[str, float] = {}
            while datetime.now(UTC) < drain_until and worker.running():
                now = datetime.now(UTC)
                if "warm" not in marks and now >= warm:
                    marks["warm"], clock["warm"] = reads(lf), time.monotonic()
                if "end" not in marks and now >= traffic_end:
                    marks["end"], clock["end"] = reads(lf), time.monotonic()
                time.sleep(0.5)
            cpu1, posts1, standin1, wall1 = cpu_seconds(pid), posts(lf), cpu_seconds(standin), time.monotonic()
            ticks = [json.loads(line) for line in worker.log_path.read_text().splitlines() if '"event": "tick"' in line]
            # Idle: once the last sweep that could still see the traffic (``lag``, 2 min) is over.
            time.sleep(max(0.0, (visible_end + timedelta(seconds=args.settle) - datetime.now(UTC)).total_seconds()))
            idle0 = reads(lf)
            time.sleep(args.idle)
            idle1 = reads(lf)
            worker.terminate()
        stored = lf.scores()
        summary = lf.score_summary()
        result.reads_by_kind = proxy.breakdown(clock.get("warm", 0.0), clock.get("end", 0.0))
    result.duplicates = int(summary.get("duplicate_count", 0))
    #: The latest and the earliest first write of each trace's scores.
    last: dict[str, datetime] = {}
    earliest: dict[str, datetime] = {}
    final: dict[str, datetime] = {}
    values: dict[str, dict[str, float]] = {}
    for s in stored:
        when = datetime.fromisoformat(s["_firstReceived"].replace("Z", "+00:00"))
        written = datetime.fromisoformat(s["_lastReceived"].replace("Z", "+00:00"))
        trace_id = s["traceId"]
        last[trace_id] = max(last.get(trace_id, when), when)
        earliest[trace_id] = min(earliest.get(trace_id, when), when)
        if written > when:
            final[trace_id] = max(final.get(trace_id, written), written)
        values.setdefault(trace_id, {})[s["name"]] = s["value"]
    fresh: list[float] = []
    for trace_id, r in rendered.items():
        if r.end < warm:
            continue
        result.measured += 1
        if trace_id not in last:
            result.missed += 1
            continue
        fresh.append((last[trace_id] - r.end).total_seconds())
        if last[trace_id] - earliest[trace_id] > timedelta(seconds=5):
            result.first_partial += 1
    if fresh:
        result.p50 = round(statistics.median(fresh), 1)
        result.p95 = round(percentile(fresh, 0.95), 1)
        result.max = round(max(fresh), 1)
        # The latest trace: when each of its scores first came (after its root's end), and how often it was
        # written (a score first posted by the re-read of late children comes that much later).
        worst = max(
            (t for t in last if t in rendered and rendered[t].end >= warm), key=lambda t: last[t] - rendered[t].end
        )
        firsts = sorted(
            (
                round(
                    (
                        datetime.fromisoformat(s["_firstReceived"].replace("Z", "+00:00")) - rendered[worst].end
                    ).total_seconds(),
                    1,
                ),
                s["name"],
            )
            for s in stored
            if s["traceId"] == worst
        )
        result.notes.append(f"latest trace {worst}: scores first stored at {firsts} s after its end")
    again = [(final[t] - r.end).total_seconds() for t, r in rendered.items() if t in final and r.end >= warm]
    result.rescored = len(again)
    if again:
        result.rescored_p95 = round(percentile(again, 0.95), 1)
        result.rescored_max = round(max(again), 1)
    scored = [t for t in rendered if t in last]
    result.scored_live = len(scored)
    steady = sum(1 for r in rendered.values() if warm <= r.end < traffic_end)
    result.reads_live = marks.get("end", 0) - marks.get("warm", 0)
    result.traces_steady = steady
    result.reads_per_100 = round(100 * result.reads_live / max(1, steady), 2)
    result.reads_by_kind_per_100 = {k: round(100 * n / max(1, steady), 2) for k, n in result.reads_by_kind.items()}
    result.posts_per_100 = round(100 * (posts1 - posts0) / max(1, len(scored)), 2)
    result.reads_per_minute_idle = round((idle1 - idle0) * 60 / args.idle, 2)
    result.cpu_ms_per_trace = round(1000 * (cpu1 - cpu0) / max(1, len(scored)), 2)
    result.standin_cpu_share = round((standin1 - standin0) / (wall1 - wall0), 2)
    result.longest_tick = max((float(t.get("duration_seconds", 0)) for t in ticks), default=0.0)
    check(result, rendered, values, args)
    return result


def check(result: Result, rendered: dict[str, Any], values: dict[str, dict[str, float]], args: Any) -> None:
    """Late children: the traces with a row visible after their root's (and ``--check`` others), scored
    locally on all their rows (the generator's, as the stand-in serves them) and compared with what was posted."""
    late = [t for t, r in rendered.items() if any(rec.visible_final > r.records[0].visible_final for rec in r.records)]
    others = [t for t in rendered if t not in set(late)][: args.check]
    result.late_traces = len(late)
    references = ReferenceSettings.model_validate(PRODUCTION_REFERENCES)
    for group, name in ((late, "late"), (others, "other")):
        samples = []
        for trace_id in group:
            r = rendered[trace_id]
            rows = [rec.row for rec in r.records]
            samples.append(extract_sample(rows, references=references, trace_id=trace_id))
        if not samples:
            continue
        local = score(samples, METRICS, kpis=KPIS).values()
        complete = 0
        for trace_id, expected in zip(group, local, strict=True):
            posted = values.get(trace_id, {})
            if posted and all(abs(posted.get(k, float("nan")) - v) < 1e-9 for k, v in expected.items()):
                complete += 1
        if name == "late":
            result.late_complete = complete
        else:
            result.checked, result.checked_complete = len(group), complete


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1,10,100", help="traces a second, comma-separated")
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds of live traffic per rate")
    parser.add_argument("--warmup", type=float, default=20.0, help="traces ending before this are not measured")
    parser.add_argument("--drain", type=float, default=60.0, help="seconds after the last row is visible")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of no traffic, reads counted")
    parser.add_argument("--settle", type=float, default=150.0, help="idle counted from this long after the traffic")
    parser.add_argument("--export-delay", type=float, default=2.0)
    parser.add_argument("--jitter", type=float, default=8.0)
    parser.add_argument("--late-rate", type=float, default=0.1)
    parser.add_argument("--late-delay", type=float, default=8.0)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds the stand-in takes per request")
    parser.add_argument("--check", type=int, default=200, help="traces without late rows checked as well")
    parser.add_argument("--code", help="a directory holding another trace_scorer package to run")
    parser.add_argument("--interval", help="the target's interval (default: the shipped one), e.g. 15s")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = []
    for rate in (float(r) for r in args.rates.split(",")):
        result = run(rate, args)
        print(json.dumps(asdict(result)), flush=True)
        results.append(asdict(result))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

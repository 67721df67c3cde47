"""Distributed mode: the same judged backlog scored by 1, 2 and 4 replicas on one PostgreSQL state.

Per-replica judge concurrency is fixed (``--concurrency``, the provider's ``max_concurrency``), the LLM
answers in 300 ms, so one replica is bound by its judge slots and N replicas should approach N times its
throughput. Printed per fleet size, in the steady state (from 10 % to 90 % of the scores stored: start-up
is not throughput): wall time, traces per second,
the speed-up over one replica, the queue's database overhead (transactions committed in the fleet's
database per 100 traces: plans, batch jobs, heartbeats, polling, the state's writes) and the workers' CPU
per trace (all replicas together). The stand-ins run in their own processes; every figure of a run comes
from that run.

    PYTHONPATH=. python bench/bench_fleet.py [--traces 600] [--replicas 1,2,4] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from bench_worker import POLITE, cpu_seconds, scenario_for
from psycopg import sql

from standins.faults import FaultConfig
from standins.handles import start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from standins.worker import PRODUCTION_REFERENCES, WorkerProcess, backlog_timing, production_target, worker_environment

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LLM_LATENCY = 0.3


def transactions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def run_fleet(replicas: int, traces: int, concurrency: int, batch_size: int, url: str) -> dict[str, Any]:
    scenario = scenario_for(traces, seed=11)
    schema = f"bench_{secrets.token_hex(4)}"
    options = LangfuseOptions(version="4.60.0", scenario=scenario, validate_answers="sample", keep_score_details=False)
    with (
        start_langfuse(options, mode="process") as lf,
        start_openai(OpenAIOptions(profile="openai", faults=FaultConfig(latency=LLM_LATENCY)), mode="process") as llm,
    ):
        target = production_target(
            ["tool_call_accuracy", POLITE], references=PRODUCTION_REFERENCES, **backlog_timing(scenario)
        )
        env = worker_environment(
            lf,
            llm,
            targets=[target],
            llm_concurrency=concurrency,
            worker_settings={"concurrency": concurrency, "batch_size": batch_size, "jobs": 2},
            extra={"TRACE_SCORER_STATE": json.dumps({"url": url, "db_schema": schema})},
        )
        workdir = Path(tempfile.mkdtemp(prefix=f"bench-fleet-{replicas}-"))
        expected = 2 * traces  # tool_call_accuracy and polite on every trace of this corpus
        started = time.monotonic()
        workers = [
            WorkerProcess(["run"], env=env, workdir=workdir, log_name=f"replica-{i}.log").start()
            for i in range(replicas)
        ]
        # Steady state: from 10 % of the scores stored to 90 % (start-up — imports, connecting, the first
        # plan — is not throughput, and the last batches drain with fewer jobs than replicas).
        marks: dict[float, tuple[float, float, int]] = {}
        try:
            for fraction in (0.1, 0.9):
                while lf.score_summary()["stored"] < fraction * expected:
                    if not all(w.running() for w in workers):
                        raise RuntimeError("a replica died:\n" + "\n".join(w.log()[-2000:] for w in workers))
                    if time.monotonic() - started > 1800:
                        raise RuntimeError(f"timeout: {lf.score_summary()['stored']} of {expected} scores")
                    time.sleep(0.05)
                marks[fraction] = (time.monotonic(), sum(cpu_seconds(w.pid) for w in workers), transactions(url))
            while lf.score_summary()["stored"] < expected and time.monotonic() - started < 1800:
                time.sleep(0.1)
        finally:
            for worker in workers:
                worker.terminate()
        (t1, cpu1, tx1), (t2, cpu2, tx2) = marks[0.1], marks[0.9]
        steady = 0.8 * traces
        wall, cpu, done = t2 - t1, cpu2 - cpu1, tx2 - tx1
        summary = lf.score_summary()
        return {
            "replicas": replicas,
            "traces": traces,
            "wall": wall,
            "per_second": steady / wall,
            "transactions_per_100": 100 * done / steady,
            "cpu_ms_per_trace": 1000 * cpu / steady,
            "duplicates": summary["duplicate_count"],
            "stored": summary["stored"],
            "llm_calls": int(llm.stats()["total_requests"]),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=800)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=4, help="judge calls in flight per replica")
    parser.add_argument("--batch-size", type=int, default=20)
    args = parser.parse_args()
    name = f"bench_fleet_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        rows = [
            run_fleet(int(n), args.traces, args.concurrency, args.batch_size, url) for n in args.replicas.split(",")
        ]
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    base = rows[0]["per_second"]
    bound = args.concurrency / LLM_LATENCY
    print(
        f"{args.traces} traces, 1 judge call each, LLM {LLM_LATENCY * 1000:.0f} ms, {args.concurrency} in flight "
        f"per replica (bound {bound:.1f} traces/s per replica), batch size {args.batch_size}"
    )
    print("Steady state: from 10 % to 90 % of the scores stored (wall, throughput, DB transactions, CPU within it).")
    print(
        "| replicas | wall s | traces/s | × one replica | DB transactions / 100 traces | worker CPU ms / trace "
        "| scores | duplicates |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['replicas']} | {row['wall']:.1f} | {row['per_second']:.2f} | {row['per_second'] / base:.2f} "
            f"| {row['transactions_per_100']:.0f} | {row['cpu_ms_per_trace']:.1f} | {row['stored']} "
            f"| {row['duplicates']} |"
        )


if __name__ == "__main__":
    main()

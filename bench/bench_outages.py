"""Outages under running workers (issue #22 items 4 and 5): what the worker did, and what ``/healthz``,
``/readyz`` and ``/metrics`` said, while the disk under the SQLite state was full, and while the fleet's
PostgreSQL was cut (a restart) or frozen (SIGSTOP).

    PYTHONPATH=. python bench/bench_outages.py disk-full [--code DIR]
    PYTHONPATH=. python bench/bench_outages.py database [--code DIR] [--postgres-url URL] [--outages cut,freeze]

``--code DIR``: run the workers from another tree of the package, for a before/after comparison, e.g.
``mkdir /tmp/old && git archive e8a2387 trace_scorer | tar -x -C /tmp/old``. ``disk-full`` needs root: it
mounts a 2 MiB tmpfs for the state, fills it, and unmounts it at the end. ``database`` puts a loopback
proxy (``tests/support/pg_proxy.py``) in front of the server, so the server itself is never stopped.
Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from standins.handles import LangfuseHandle, start_langfuse
from standins.langfuse_server import LangfuseOptions
from standins.worker import WorkerProcess, worker_environment
from tests.support.e2e import backlog, target_for
from tests.support.pg_proxy import pg_proxy

METRICS = ("trace_scorer_up", "trace_scorer_scores_posted_total", "trace_scorer_state")


def probe(port: int, path: str, timeout: float = 10.0) -> str:
    """``GET path``: the status, the reason (probes) or the lines worth quoting (metrics), how long it took."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            status, body = answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read().decode()
    except OSError as exc:
        return f"no answer in {time.monotonic() - started:.1f} s ({type(exc).__name__})"
    took = f"{time.monotonic() - started:.2f} s"
    if path == "/metrics":
        lines = [line for line in body.splitlines() if line.startswith(METRICS)]
        return f"{status} in {took}: " + "; ".join(lines)
    return f"{status} in {took}: {json.loads(body).get('reason')}"


def ops_port(worker: WorkerProcess) -> int | None:
    started = worker.events("ops_server_started")
    return int(started[0]["port"]) if started else None


def report(label: str, workers: list[WorkerProcess], lf: LangfuseHandle) -> None:
    summary = lf.score_summary()
    print(f"\n[{label}] Langfuse: stored {summary['stored']}, writes {summary['writes']}, "
          f"overwrites {summary['overwrites']}, score requests {lf.count('POST /api/public/scores')}")
    for worker in workers:
        log = worker.log()
        state = "running" if worker.running() else f"exited {worker.process.returncode if worker.process else '?'}"
        print(f"  {worker.log_path.name}: {state}; tracebacks in its log: {log.count('Traceback')}; "
              f"state_write_failed {len(worker.events('state_write_failed'))}, "
              f"queue_worker_stopped {len(worker.events('queue_worker_stopped'))}")
        port = ops_port(worker)
        if port is not None and worker.running():
            for path in ("/healthz", "/readyz", "/metrics"):
                print(f"    {path}: {probe(port, path)}")


def wait_for(condition: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.25)
    return False


def with_code(env: dict[str, str], code: str | None) -> dict[str, str]:
    if code:
        env["PYTHONPATH"] = os.pathsep.join([str(Path(code).absolute()), env["PYTHONPATH"]])
    return env


def disk_full(code: str | None) -> None:
    scenario = backlog(300)
    lf = start_langfuse(LangfuseOptions(version="4.60.0", scenario=scenario))
    with tempfile.TemporaryDirectory() as workdir:
        disk = Path(workdir) / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
        try:
            # The disk full but for ~150 KiB: room for a new state and its start-up, not for a backlog's ledger.
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            (disk / "filler").write_bytes(b"\0" * (free - 150 * 1024))
            env = worker_environment(
                lf,
                targets=[target_for(scenario, metrics=["tool_call_accuracy", "rouge"], interval="1s")],
                worker_settings={"batch_size": 100},
                state_path=disk / "state.db",
            )
            worker = WorkerProcess(["run"], env=with_code(env, code), workdir=Path(workdir), log_name="worker.log")
            worker.start()
            wait_for(lambda: worker.events("tick") or not worker.running(), 120)
            time.sleep(30)  # 30 ticks with the disk full
            report("disk full, 30 s", [worker], lf)
            (disk / "filler").unlink()
            time.sleep(10)
            report("10 s after space was freed", [worker], lf)
            worker.terminate()
        finally:
            subprocess.run(["umount", str(disk)], check=False)
            lf.stop()


def database(code: str | None, admin_url: str, outages: list[str]) -> None:
    name = f"trace_scorer_outage_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = re.sub(r"/[^/?]*(\?|$)", rf"/{name}\1", admin_url.split("//", 1)[1], count=1)
    url = admin_url.split("//", 1)[0] + "//" + url
    scenario = backlog(2000)
    lf = start_langfuse(LangfuseOptions(version="4.60.0", scenario=scenario))
    try:
        with pg_proxy(url) as (proxy, proxied), tempfile.TemporaryDirectory() as workdir:
            env = worker_environment(
                lf,
                targets=[target_for(scenario, metrics=["tool_call_accuracy", "rouge"], interval="1s")],
                worker_settings={"batch_size": 20, "jobs": 2, "stalled_after": "5s"},
                extra={"TRACE_SCORER_STATE": json.dumps({"url": proxied, "db_schema": "outage"})},
            )
            workers = [
                WorkerProcess(["run"], env=with_code(dict(env), code), workdir=Path(workdir), log_name=f"r{i}.log")
                for i in range(2)
            ]
            for worker in workers:
                worker.start()
            wait_for(lambda: lf.score_summary()["stored"] > 0, 120)
            report("before the outage", workers, lf)
            for outage in outages:
                if outage == "cut":
                    proxy.cut()
                    time.sleep(22)
                    report("database cut (a restart) for 22 s", workers, lf)
                else:
                    proxy.freeze()
                    time.sleep(20)
                    report("database frozen (SIGSTOP) for 20 s", workers, lf)
                proxy.restore()
                time.sleep(20)
                report("20 s after it was back", workers, lf)
            for worker in workers:
                if worker.running():
                    worker.terminate()
    finally:
        lf.stop()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["disk-full", "database"])
    parser.add_argument("--code", help="a directory holding the trace_scorer package to run instead")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--outages", default="cut,freeze", help="database: which outages, in order (cut, freeze)")
    args = parser.parse_args()
    if args.case == "disk-full":
        disk_full(args.code)
    else:
        database(args.code, args.postgres_url, args.outages.split(","))


if __name__ == "__main__":
    main()

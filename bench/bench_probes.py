"""Can idle or hostile connections hold the worker's probes down? (issue #22, item 6)

Starts ``trace-scorer run`` against the Langfuse stand-in (one target, a deterministic metric, ticks every
2 s), waits until it is ready, then holds connections open to its ops port the way a careless or hostile
client in the cluster network could — ``--idle`` connections that send nothing and ``--loris`` that send a
request head one byte at a time — and probes ``/healthz``, ``/readyz`` and ``/metrics`` ``--probes`` times
each, as the kubelet would (a fresh connection each, a 1 s timeout: the kubelet's default
``timeoutSeconds``). Prints what each probe answered: the status, or ``timeout`` / ``refused``.

    PYTHONPATH=. .venv/bin/python bench/bench_probes.py --idle 40 --loris 10 --probes 14
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from standins.generate import Scenario
from standins.handles import start_langfuse, wait_until
from standins.langfuse_server import LangfuseOptions
from standins.worker import WorkerProcess, production_target, worker_environment


def ops_port(worker: WorkerProcess) -> int:
    found: list[int] = []

    def announced() -> bool:
        for line in worker.log().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "ops_server_started":
                found.append(int(event["port"]))
                return True
        return False

    if not wait_until(announced, timeout=60):
        raise SystemExit("the worker did not start its endpoints:\n" + worker.log()[-3000:])
    return found[0]


def hold_idle(port: int, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        held.append(socket.create_connection(("127.0.0.1", port)))
    return held


def slow_loris(port: int, count: int, stop: threading.Event) -> list[socket.socket]:
    """``count`` connections sending ``GET /healthz HTTP/1.1\\r\\nX-a: …`` one byte every 0.5 s, never ending."""
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"

    def drip() -> None:
        sent = 0
        while not stop.wait(0.5):
            byte = head[sent : sent + 1] if sent < len(head) else b"a"
            for sock in list(held):
                try:
                    sock.sendall(byte)
                except OSError:
                    held.remove(sock)
            sent += 1

    threading.Thread(target=drip, daemon=True).start()
    return held


def probe(url: str) -> str:
    """The answer's status and what it said: the probe's reason, or /metrics' ``trace_scorer_up`` lines."""
    try:
        answer = httpx.get(url, timeout=1.0)
        if answer.headers.get("content-type", "").startswith("application/json"):
            return f"{answer.status_code} {answer.json().get('reason')!r}"
        lines = answer.text.splitlines()
        up = [line.split("trace_scorer_up")[1] for line in lines if line.startswith("trace_scorer_up{")]
        return f"{answer.status_code} up{' '.join(up)}"
    except httpx.TimeoutException:
        return "timeout"
    except httpx.TransportError as error:
        return type(error).__name__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=40, help="connections held open that send nothing")
    parser.add_argument("--loris", type=int, default=0, help="connections trickling a request head")
    parser.add_argument("--probes", type=int, default=14, help="probes of each endpoint")
    args = parser.parse_args()

    end = (datetime.now(UTC) - timedelta(minutes=2)).isoformat()
    scenario = Scenario(seed=7, traces=20, spacing=1.0, end=end, datasets=())
    with tempfile.TemporaryDirectory() as scratch, start_langfuse(LangfuseOptions(scenario=scenario)) as langfuse:
        entry = production_target(["tool_correctness"], interval="2s", lookback="30m", lag="0s", quiet_period="0s")
        http = {"enabled": True, "host": "127.0.0.1", "port": 0}
        env = worker_environment(langfuse, targets=[entry], extra={"TRACE_SCORER_HTTP": json.dumps(http)})
        with WorkerProcess(["run"], env=env, workdir=Path(scratch)) as worker:
            url = f"http://127.0.0.1:{ops_port(worker)}"
            if not wait_until(lambda: probe(url + "/readyz").startswith("200"), timeout=60):
                raise SystemExit("the worker never became ready:\n" + worker.log()[-3000:])
            stop = threading.Event()
            held = hold_idle(int(url.rsplit(":", 1)[1]), args.idle)
            held += slow_loris(int(url.rsplit(":", 1)[1]), args.loris, stop)
            started = time.monotonic()
            answers: dict[str, collections.Counter[str]] = {}
            for path in ("/healthz", "/readyz", "/metrics"):
                answers[path] = collections.Counter(probe(url + path) for _ in range(args.probes))
            took = time.monotonic() - started
            stop.set()
            for sock in held:
                sock.close()
            print(f"idle={args.idle} loris={args.loris} probes={args.probes} each ({took:.1f} s)")
            for path, counts in answers.items():
                print(f"  {path:9} " + ", ".join(f"{n} × {answer}" for answer, n in sorted(counts.items())))
            worker.terminate()


if __name__ == "__main__":
    main()

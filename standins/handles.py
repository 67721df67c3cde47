"""Start a stand-in (background thread or separate process) and read what it saw.

Both ways give a handle with the same methods; everything goes through the stand-in's control routes
(``/_standin/…``) over HTTP, so a test reads a process-hosted server exactly like a threaded one::

    with start_langfuse(LangfuseOptions(scenario=Scenario(seed=3, traces=500)), mode="process") as lf:
        run_the_worker(base_url=lf.url, public_key=lf.public_key, secret_key=lf.secret_key)
        assert lf.violations() == []
        assert lf.score_summary()["duplicate_count"] == 0

    with start_openai(OpenAIOptions(latency=0.3)) as llm:
        ...  # base_url=llm.url + "/v1"
        print(llm.request_counts())

Process mode runs ``python -m standins.langfuse_server`` / ``python -m standins.openai_server`` with the
repository root on ``PYTHONPATH``, waits for the line announcing the port, and stops the process with
SIGTERM (SIGKILL after a grace period) — only that process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from standins.faults import FaultConfig, ScriptedFault
from standins.http import ServerThread

REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 60.0


class StandinHandle:
    """A running stand-in: its URL, and its control API."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._control = httpx.Client(base_url=url, timeout=30.0)
        self.stopped = False

    # --- lifecycle (subclasses) ------------------------------------------------------------------

    def stop(self) -> None:
        self.stopped = True
        self._control.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- control ---------------------------------------------------------------------------------

    def _get(self, path: str, **params: Any) -> Any:
        response = self._control.get(f"/_standin/{path}", params={k: v for k, v in params.items() if v is not None})
        response.raise_for_status()
        return response.json()

    def _post(self, path: str, body: Any = None) -> Any:
        response = self._control.post(f"/_standin/{path}", json=body or {})
        if response.status_code >= 400:
            raise ValueError(f"{path}: {response.status_code} {response.text}")
        return response.json()

    def stats(self) -> dict[str, Any]:
        return dict(self._get("stats"))

    def violations(self) -> list[str]:
        """Contract violations seen (requests and answers); a test expects none."""
        return list(self.stats()["violations"])

    def request_counts(self) -> dict[str, dict[str, int]]:
        """route label → outcome (HTTP status, "dropped", "reset") → count."""
        return dict(self.stats()["requests"])

    def count(self, route: str, outcome: str | None = None) -> int:
        """Requests to one route (label ``"GET /api/public/v2/observations"`` or a bare path)."""
        total = 0
        for label, outcomes in self.request_counts().items():
            if route in (label, label.split(" ", 1)[-1]):
                total += sum(n for o, n in outcomes.items() if outcome is None or o == outcome)
        return total

    def rate_limited(self) -> list[dict[str, Any]]:
        """Each 429 sent: route, when (seconds since start), Retry-After, when the retry was due."""
        return list(self.stats()["rate_limited"])

    def early_requests(self) -> list[dict[str, Any]]:
        """Retries of a 429'd request that came before its Retry-After had passed (should be none)."""
        return list(self.stats()["early"])

    def set_faults(self, config: FaultConfig | None = None, **values: Any) -> None:
        """Replace the fault rates: ``set_faults(rate_429=0.3, retry_after=1)`` or a :class:`FaultConfig`."""
        data = (config or FaultConfig.from_dict(values)).to_dict()
        self._post("faults", {"config": data})

    def script_faults(self, *faults: ScriptedFault) -> None:
        """Queue one-off faults, each for the next request to its route."""
        self._post("faults", {"script": [f.__dict__ for f in faults]})

    def release(self) -> None:
        """Answer every request a ``hold`` fault is holding; later holds no longer wait."""
        self._post("release")

    def clear_faults(self) -> None:
        self._post("faults", {"config": FaultConfig().to_dict(), "clear_script": True})

    def reset(self) -> None:
        """Clear counters, violations and the 429 ledger (not the data, not the scores)."""
        self._post("reset")


class LangfuseHandle(StandinHandle):
    def __init__(self, url: str, public_key: str, secret_key: str) -> None:
        super().__init__(url)
        self.public_key = public_key
        self.secret_key = secret_key

    def scores(self, *, name: str | None = None, trace_id: str | None = None) -> list[dict[str, Any]]:
        """Stored scores (as posted, plus ``_writes`` and receive times)."""
        return list(self._get("scores", name=name, traceId=trace_id)["data"])

    def scores_by_subject(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """(subject id, score name) → stored scores; subject id = traceId, traceId/observationId or runId."""
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for score in self.scores():
            if score.get("observationId"):
                subject = f"{score.get('traceId')}/{score['observationId']}"
            else:
                subject = score.get("traceId") or score.get("sessionId") or score.get("datasetRunId") or ""
            out.setdefault((subject, score["name"]), []).append(score)
        return out

    def score_summary(self) -> dict[str, Any]:
        """``stored``, ``writes``, ``overwrites``, ``by_name``, ``duplicates`` (subject+name held twice)."""
        return dict(self._get("scores/summary"))

    def clear_scores(self) -> None:
        self._post("scores/clear")

    def reject_scores(self, *names: str, message: str = "rejected by the stand-in") -> None:
        """Scores with these names are rejected (207) from now on; no names: accept all again."""
        self._post("scores/reject", {"names": list(names), "message": message})

    def add_score_configs(self, *configs: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self._post("score-configs", {"configs": list(configs)})["data"])

    def add_traces(self, *traces: list[dict[str, Any]]) -> list[str]:
        """Traces given as v4 observation rows (full rows, root included), visible at once."""
        return list(self._post("traces", {"traces": list(traces)})["added"])

    def set_options(self, **options: Any) -> dict[str, Any]:
        """``repeat_boundary_rows`` (duplicates across pages), ``validate_answers`` (all, sample, none)."""
        return dict(self._post("options", options))

    def corpus(self, ids: str | None = None, environment: str | None = None) -> dict[str, Any]:
        """The scenario and counts; ``ids="production"`` adds the backlog's trace ids (and hostile ones),
        ``ids="experiments"`` every experiment item (trace, experiment, dataset item)."""
        return dict(self._get("corpus", ids=ids, environment=environment))

    def otel(self) -> dict[str, Any]:
        """OTLP exports received: request and span counts, span summaries (name, traceId, attributes)."""
        return dict(self._get("otel"))


class OpenAIHandle(StandinHandle):
    def set_options(self, **options: Any) -> dict[str, Any]:
        """``yes_rate``, ``invalid_rate``, ``reject_response_format``, ``embedding_dim``."""
        return dict(self._post("options", options))


class _Threaded:
    _thread: ServerThread

    def stop(self) -> None:
        self._thread.stop()


class _Process:
    process: subprocess.Popen[str]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    @property
    def pid(self) -> int:
        return self.process.pid


class ThreadedLangfuse(_Threaded, LangfuseHandle):
    def stop(self) -> None:
        LangfuseHandle.stop(self)
        _Threaded.stop(self)


class ProcessLangfuse(_Process, LangfuseHandle):
    def stop(self) -> None:
        LangfuseHandle.stop(self)
        _Process.stop(self)


class ThreadedOpenAI(_Threaded, OpenAIHandle):
    def stop(self) -> None:
        OpenAIHandle.stop(self)
        _Threaded.stop(self)


class ProcessOpenAI(_Process, OpenAIHandle):
    def stop(self) -> None:
        OpenAIHandle.stop(self)
        _Process.stop(self)


def spawn(
    module: str, argv: list[str], *, timeout: float = START_TIMEOUT, port: int = 0
) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """Start ``python -m module argv…`` and wait for its announcement line ``{"port", "url", "pid"}``.

    ``port``: 0 lets the OS pick (the default); a fixed one is for tests that start a stand-in where a
    client already points (e.g. "Langfuse unreachable at start-up, then up")."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--port", str(port), *argv],
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    announced: list[dict[str, Any]] = []
    ready = threading.Event()

    def drain() -> None:
        """Find the announcement, then keep reading stdout so the pipe never fills and blocks the server."""
        assert process.stdout is not None
        for line in process.stdout:
            if not announced:
                try:
                    value = json.loads(line)
                except ValueError:
                    value = None
                if isinstance(value, dict) and "port" in value:
                    announced.append(value)
                    ready.set()
                    continue
            sys.stderr.write(line)
        ready.set()

    threading.Thread(target=drain, name=f"{module}-stdout", daemon=True).start()
    ready.wait(timeout)
    if not announced:
        process.kill()
        process.wait(10)
        raise RuntimeError(f"{module} did not announce its port within {timeout:.0f} s (exit code {process.poll()})")
    return process, announced[0]


def start_langfuse(options: Any = None, *, mode: str = "thread", port: int = 0) -> LangfuseHandle:
    """A Langfuse stand-in with these :class:`~standins.langfuse_server.LangfuseOptions` (on ``port``
    of 127.0.0.1; 0, the default, lets the OS pick)."""
    from standins.langfuse_server import LangfuseApp, LangfuseOptions, options_to_argv

    options = options or LangfuseOptions()
    if mode == "thread":
        app = LangfuseApp(options)
        thread = ServerThread(app.handle, port=port, name="langfuse-standin")
        port = thread.start()
        handle = ThreadedLangfuse(f"http://127.0.0.1:{port}", options.public_key, options.secret_key)
        handle._thread = thread
        return handle
    if mode == "process":
        process, announced = spawn("standins.langfuse_server", options_to_argv(options), port=port)
        proc_handle = ProcessLangfuse(announced["url"], options.public_key, options.secret_key)
        proc_handle.process = process
        return proc_handle
    raise ValueError("mode is 'thread' or 'process'")


def start_openai(options: Any = None, *, mode: str = "thread") -> OpenAIHandle:
    """An OpenAI-compatible stand-in with these :class:`~standins.openai_server.OpenAIOptions`."""
    from standins.openai_server import OpenAIApp, OpenAIOptions, options_to_argv

    options = options or OpenAIOptions()
    if mode == "thread":
        app = OpenAIApp(options)
        thread = ServerThread(app.handle, name="openai-standin")
        port = thread.start()
        handle = ThreadedOpenAI(f"http://127.0.0.1:{port}")
        handle._thread = thread
        return handle
    if mode == "process":
        process, announced = spawn("standins.openai_server", options_to_argv(options))
        proc_handle = ProcessOpenAI(announced["url"])
        proc_handle.process = process
        return proc_handle
    raise ValueError("mode is 'thread' or 'process'")


def wait_until(predicate: Any, *, timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Poll ``predicate()`` until true or ``timeout`` seconds pass (bounded: for tests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())

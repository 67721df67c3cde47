"""Hooks for the end-to-end benchmarks and crash tests that drive ``trace-scorer run`` against the stand-ins.

- :func:`worker_environment`: the environment that points a worker process at the stand-ins (Langfuse
  URL and keys, the LLM provider, targets, fast retries), with no ``settings.toml`` needed: every
  section is passed as JSON in ``TRACE_SCORER_<SECTION>`` (pydantic-settings reads complex values as
  JSON). :func:`load_worker_settings` checks the result with the project's own loader.
- :class:`WorkerProcess`: ``python -m trace_scorer <args>`` as a separate process in a scratch directory:
  ``kill9()`` for crash tests, ``terminate()`` for a graceful stop, ``peak_rss_mb`` sampled from
  ``/proc/<pid>/status`` (``VmHWM``) while it runs, bounded waits.

Example (once the worker exists)::

    with start_langfuse(opts, mode="process") as lf, start_openai(OpenAIOptions(...), mode="process") as llm:
        env = worker_environment(lf, llm, targets=[production_target(["tool_call_accuracy", "agent_goal_accuracy"])])
        with WorkerProcess(["run"], env=env, workdir=tmp_path) as worker:
            wait_until(lambda: lf.score_summary()["stored"] >= expected, timeout=600)
            worker.terminate()
        print(worker.peak_rss_mb, lf.request_counts())
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from standins.handles import REPO_ROOT, LangfuseHandle, OpenAIHandle

#: The provider's key variable (the stand-in accepts any key unless told otherwise).
LLM_KEY_VARIABLE = "STANDIN_LLM_API_KEY"


#: ``[targets.references]`` for the generator's golden references on production roots
#: (``Scenario.references_rate``): ``expected_answer`` and ``expected_calls`` in the root's metadata.
PRODUCTION_REFERENCES: dict[str, list[str]] = {
    "expected": ["$.trace.metadata.expected_answer"],
    "reference_tool_calls": ["$.trace.metadata.expected_calls"],
}


def backlog_timing(scenario: Any, *, margin: float = 600.0) -> dict[str, Any]:
    """``lookback`` / ``lag`` / ``quiet_period`` that make every backlog trace of ``scenario`` eligible on
    the first tick, for a scenario whose backlog ``end`` lies at least a minute in the past (traces last
    at most 60 s, so all have ended): the lookback reaches before the first trace, no lag, a short quiet
    period (the worker's clock is the real one)."""
    span = scenario.spacing * (scenario.traces + 1)
    end = datetime.fromisoformat(scenario.end) if scenario.end else datetime.now(UTC)
    behind = max(0.0, (datetime.now(UTC) - end).total_seconds())
    return {"lookback": f"{int(span + behind + margin)}s", "lag": "0s", "quiet_period": "1s"}


def production_target(
    metrics: Sequence[str | dict[str, Any]], *, name: str = "production", interval: str = "2s", **options: Any
) -> dict[str, Any]:
    """A ``[[targets]]`` entry for production traces with these metrics (a name or a full entry each);
    ``options``: any other target key (``lookback``, ``lag``, ``quiet_period``, ``max_window``,
    ``references``, ``filter``…)."""
    entries = [{"metric": m} if isinstance(m, str) else dict(m) for m in metrics]
    return {"name": name, "source": "traces", "interval": interval, "metrics": entries, **options}


def dataset_runs_target(
    metrics: Sequence[str | dict[str, Any]], *, name: str = "experiments", interval: str = "2s", **options: Any
) -> dict[str, Any]:
    entries = [{"metric": m} if isinstance(m, str) else dict(m) for m in metrics]
    return {"name": name, "source": "dataset_runs", "interval": interval, "metrics": entries, **options}


def worker_environment(
    langfuse: LangfuseHandle,
    llm: OpenAIHandle | None = None,
    *,
    targets: Sequence[Mapping[str, Any]] = (),
    models: Sequence[str] = ("judge-a",),
    llm_concurrency: int = 16,
    langfuse_settings: Mapping[str, Any] | None = None,
    judge_settings: Mapping[str, Any] | None = None,
    worker_settings: Mapping[str, Any] | None = None,
    state_path: str | Path | None = None,
    provider_settings: Mapping[str, Any] | None = None,
    extra: Mapping[str, str] | None = None,
    inherit: bool = True,
) -> dict[str, str]:
    """Environment variables that configure a worker for the stand-ins (see the module docstring).

    Langfuse retries are shortened (0.1 s initial back-off) so fault tests stay fast; Retry-After is
    still what a 429 asks. ``langfuse_settings`` / ``judge_settings`` / ``provider_settings`` override any
    key of those sections; ``worker_settings`` is ``[worker]`` (concurrency, batch_size, shutdown_grace);
    ``state_path`` the SQLite file (default: ``trace-scorer.db`` in the worker's directory — a restart
    with the same path and directory resumes).
    """
    env = dict(os.environ) if inherit else {}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    lf: dict[str, Any] = {
        "base_url": langfuse.url,
        "public_key": langfuse.public_key,
        "timeout": "30s",
        "retry": {"initial": 0.1, "multiplier": 2.0, "max": 2.0, "max_attempts": 10},
    }
    lf.update(langfuse_settings or {})
    env["LANGFUSE_PUBLIC_KEY"] = langfuse.public_key
    env["LANGFUSE_SECRET_KEY"] = langfuse.secret_key
    env["LANGFUSE_BASE_URL"] = langfuse.url
    env["TRACE_SCORER_LANGFUSE"] = json.dumps(lf)
    judge: dict[str, Any] = {"tracing": False, "retry_initial_wait": 0.1, "retry_max_wait": 2.0}
    judge.update(judge_settings or {})
    env["TRACE_SCORER_JUDGE"] = json.dumps(judge)
    if llm is not None:
        provider = {
            "name": "standin",
            "base_url": llm.url + "/v1",
            "api_key_env": LLM_KEY_VARIABLE,
            "chat_models": list(models),
            "embedding_models": ["standin-embed"],
            "max_concurrency": llm_concurrency,
            "timeout": "60s",
        }
        provider.update(provider_settings or {})
        env["TRACE_SCORER_PROVIDERS"] = json.dumps([provider])
        env[LLM_KEY_VARIABLE] = "sk-standin"
    env["TRACE_SCORER_TARGETS"] = json.dumps(list(targets))
    if worker_settings:
        env["TRACE_SCORER_WORKER"] = json.dumps(dict(worker_settings))
    if state_path is not None:
        env["TRACE_SCORER_STATE"] = json.dumps({"path": str(state_path)})
    env["TRACE_SCORER_HTTP"] = json.dumps({"enabled": True, "host": "127.0.0.1", "port": 0})
    env["TRACE_SCORER_LOG"] = json.dumps({"level": "INFO", "format": "json"})
    env.update(extra or {})
    return env


def load_worker_settings(env: Mapping[str, str]) -> Any:
    """The worker's settings as ``trace_scorer.config.settings.load_settings`` reads them from ``env``
    (no settings file): raises ``ConfigError`` naming the key when the environment is wrong."""
    from trace_scorer.config.settings import load_settings

    return load_settings(None, environ=dict(env))


def _peak_rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


class WorkerProcess:
    """``python -m trace_scorer <args>`` in ``workdir`` (so no stray settings.toml is read)."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        workdir: Path,
        log_name: str = "worker.log",
        sample_every: float = 0.2,
        module: str = "trace_scorer",
    ) -> None:
        """``module``: what ``python -m`` runs (``standins.stepped_clock``: the worker with a clock the test steps)."""
        self.module = module
        self.args = list(args)
        self.env = dict(env)
        self.workdir = Path(workdir)
        self.log_path = self.workdir / log_name
        self._sample_every = sample_every
        self._peak_kb = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._sampler: threading.Thread | None = None

    def start(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        assert self.process is not None
        while self.process.poll() is None:
            peak = _peak_rss_kb(self.process.pid)
            if peak is not None:
                self._peak_kb = max(self._peak_kb, peak)
            time.sleep(self._sample_every)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def peak_rss_mb(self) -> float:
        """Highest resident set size seen (``VmHWM``, sampled every ``sample_every`` seconds)."""
        if self.process is not None and self.process.poll() is None:
            peak = _peak_rss_kb(self.process.pid)
            if peak is not None:
                self._peak_kb = max(self._peak_kb, peak)
        return self._peak_kb / 1024

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill9(self) -> int | None:
        """SIGKILL: the crash the state must survive. Returns the exit code."""
        if self.running():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
        return self.wait(10)

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (the worker finishes its batch, flushes, exits 0); SIGKILL after ``timeout``."""
        if self.running():
            assert self.process is not None
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.wait(10)

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The JSON log lines (structlog events), all of them or those whose ``event`` is ``name``."""
        found = []
        for line in self.log().splitlines():
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                found.append(event)
        return found

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.running():
            self.terminate(timeout=30)
        if self._sampler is not None:
            self._sampler.join(5)

"""Liveness and readiness of the worker, as ``/healthz`` and ``/readyz`` report them.

**Liveness** (``/healthz``; the kubelet restarts the container when it fails): the process and its
scheduler loop are alive. Each target's job reports ``tick_started(target, interval)`` when a tick
begins (and may report ``progress(target)`` during a long one); liveness fails when some target has
shown no activity for ``max(liveness_intervals × interval, liveness_min)`` seconds — its job stopped
being scheduled, or a tick hangs (the scheduler never runs two ticks of one target at once, so a hung
tick stops the target's ticks). A target registered with :meth:`Health.watch` before the scheduler starts
fails the same way if its first tick never comes. A loop that is blocked outright does not answer the
probe at all, which fails it too.

**Readiness** (``/readyz``): configuration loaded, Langfuse reachable with valid credentials at the last
check (the worker reports every check's outcome), the fleet's database answering (distributed mode), and
not shutting down. Not ready until the first
check succeeded. Readiness never restarts anything; in Kubernetes it only takes the pod out of a
Service's endpoints — which is why the sidecar example does **not** put a readiness probe on the
trace-scorer container (a Langfuse outage must not take the agent it sits next to out of service).

Both answers are JSON with a ``reason`` a person can act on. Time comes from an injectable monotonic
clock, so tests can move it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trace_scorer.logs import redact_text

#: Langfuse failure reasons are cut to this length (they may quote a response body).
MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class Probe:
    """One probe's answer: ``ok`` decides the HTTP status (200 / 503), the rest is the JSON body."""

    ok: bool
    reason: str
    details: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "fail", "reason": self.reason, **self.details}


@dataclass
class _Target:
    interval: float
    last_activity: float
    ticks: int = 0


class Health:
    """What ``/healthz`` and ``/readyz`` answer. Thread-safe; every method is cheap."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        liveness_intervals: float = 3.0,
        liveness_min: float = 120.0,
    ) -> None:
        if liveness_intervals <= 1:
            raise ValueError("liveness_intervals must be greater than 1")
        self._clock = clock
        self._intervals = liveness_intervals
        self._min = liveness_min
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}
        self._config_loaded = False
        self._shutting_down = False
        self._stopped: dict[str, str] = {}
        self._langfuse_ok: bool | None = None
        self._langfuse_reason = "Langfuse not checked yet"
        self._langfuse_checked: float | None = None
        #: The shared database of a fleet (None: the worker has none — SQLite state).
        self._database_ok: bool | None = None
        self._database_reason = ""
        self._started = clock()

    # -- what the worker reports -----------------------------------------------------------------------

    def config_loaded(self) -> None:
        with self._lock:
            self._config_loaded = True

    def watch(self, target: str, interval: float) -> None:
        """Expect ticks of ``target`` every ``interval`` seconds from now on (call before the scheduler starts)."""
        with self._lock:
            self._targets.setdefault(target, _Target(interval, self._clock())).interval = interval

    def tick_started(self, target: str, interval: float) -> None:
        with self._lock:
            state = self._targets.setdefault(target, _Target(interval, self._clock()))
            state.interval = interval
            state.last_activity = self._clock()
            state.ticks += 1

    def progress(self, target: str) -> None:
        """A long tick is still moving (e.g. after each page or batch): counts as activity for liveness."""
        with self._lock:
            if target in self._targets:
                self._targets[target].last_activity = self._clock()

    def langfuse_ok(self, detail: str = "Langfuse reachable, credentials valid") -> None:
        with self._lock:
            self._langfuse_ok = True
            self._langfuse_reason = detail
            self._langfuse_checked = self._clock()

    def langfuse_failed(self, reason: str) -> None:
        """The last check failed: unreachable, 401/403, 5xx… ``reason`` is shown (redacted, shortened)."""
        text = redact_text(reason.strip() or "Langfuse check failed")[:MAX_REASON_CHARS]
        with self._lock:
            self._langfuse_ok = False
            self._langfuse_reason = text
            self._langfuse_checked = self._clock()

    def database_ok(self, detail: str = "database reachable") -> None:
        with self._lock:
            self._database_ok = True
            self._database_reason = detail

    def database_failed(self, reason: str) -> None:
        """The state's database did not answer (the fleet's PostgreSQL: state and queue) or took no write
        (the SQLite file: disk full, read-only): not ready until it does."""
        text = redact_text(reason.strip() or "database check failed")[:MAX_REASON_CHARS]
        with self._lock:
            self._database_ok = False
            self._database_reason = text

    def target_stopped(self, target: str, reason: str) -> None:
        """``target`` cannot work against this server (e.g. a request the server refuses as a whole):
        not ready, with the reason, until restarted; its ticks no longer count for liveness."""
        text = redact_text(reason.strip() or "stopped")[:MAX_REASON_CHARS]
        with self._lock:
            self._stopped[target] = text
            self._targets.pop(target, None)

    def shutting_down(self) -> None:
        """SIGTERM received: not ready any more (liveness unaffected while the batch in hand finishes)."""
        with self._lock:
            self._shutting_down = True

    # -- what the probes answer ----------------------------------------------------------------------------

    def liveness(self) -> Probe:
        now = self._clock()
        with self._lock:
            targets = {}
            stalled = []
            for name, state in sorted(self._targets.items()):
                limit = max(self._intervals * state.interval, self._min)
                idle = now - state.last_activity
                targets[name] = {
                    "interval_seconds": state.interval,
                    "idle_seconds": round(idle, 3),
                    "limit_seconds": limit,
                    "ticks": state.ticks,
                }
                if idle > limit:
                    stalled.append(f"{name} (no tick for {idle:.0f}s, limit {limit:.0f}s)")
        details = {"uptime_seconds": round(now - self._started, 3), "targets": targets}
        if stalled:
            return Probe(False, "scheduler stalled: " + ", ".join(stalled), details)
        return Probe(True, "alive" if targets else "alive (no target scheduled yet)", details)

    def readiness(self) -> Probe:
        now = self._clock()
        with self._lock:
            checked = None if self._langfuse_checked is None else round(now - self._langfuse_checked, 3)
            details = {
                "config_loaded": self._config_loaded,
                "langfuse": {"ok": self._langfuse_ok, "reason": self._langfuse_reason, "checked_seconds_ago": checked},
                "stopped_targets": dict(self._stopped),
            }
            if self._database_ok is not None:
                details["database"] = {"ok": self._database_ok, "reason": self._database_reason}
            if self._shutting_down:
                return Probe(False, "shutting down", details)
            if not self._config_loaded:
                return Probe(False, "configuration not loaded", details)
            if self._stopped:
                stopped = "; ".join(f"target {name} stopped: {why}" for name, why in sorted(self._stopped.items()))
                return Probe(False, stopped, details)
            if self._langfuse_ok is not True:
                return Probe(False, f"Langfuse: {self._langfuse_reason}", details)
            if self._database_ok is False:
                return Probe(False, f"database: {self._database_reason}", details)
        return Probe(True, "ready", details)

    @property
    def langfuse_up(self) -> bool | None:
        """The last Langfuse check's outcome; None before the first check."""
        with self._lock:
            return self._langfuse_ok

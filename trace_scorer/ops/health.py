"""Liveness and readiness of the worker, as ``/healthz`` and ``/readyz`` report them (docs/deploy.md,
"What the probes mean", lists every reason with its exact text).

**Liveness** (``/healthz``; the kubelet restarts the container when it fails) fails only when the worker
is really stuck. Each target's job reports ``tick_started(target, interval)`` when a tick begins and
``progress(target, wait)`` while it works: a trace listed, fetched or scored, a request sent, a piece of
an answer received, and — with ``wait`` — a retry's back-off or a request budget's pause announced
before it is waited out (:mod:`trace_scorer.runtime.progress` carries these up from the Langfuse transport and
the retry loop). Liveness fails when some target has shown no activity for
``max(liveness_intervals × interval, liveness_min)`` seconds past the last announced wait — its job
stopped being scheduled, or a tick hangs (the scheduler never runs two ticks of one target at once, so a
hung tick stops the target's ticks). A slow Langfuse that keeps answering, a back-off, a server that
trickles a page: all are progress. A target registered with :meth:`Health.watch` before the scheduler
starts fails the same way if its first tick never comes. A loop that is blocked outright does not answer
the probe at all, which fails it too.

**Readiness** (``/readyz``) fails while the worker cannot do its job: each reason is a named condition
(:meth:`Health.not_ready` / :meth:`Health.ready_again`; the methods below are the worker's named uses),
all of them listed in ``reasons``, the first by :data:`READINESS_ORDER` in ``reason``. Not ready until
configuration is loaded and the first Langfuse check succeeded. Readiness never restarts anything; in
Kubernetes it only takes the pod out of a Service's endpoints — which is why the sidecar example does
**not** put a readiness probe on the trace-scorer container (a Langfuse outage must not take the agent
it sits next to out of service).

Both answers are JSON with a ``reason`` a person can act on. Time comes from an injectable monotonic
clock, so tests can move it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trace_scorer.runtime.logs import redact_text

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
    #: Until when quiet was announced (a retry's wait, on the monotonic clock): the limit runs from there.
    quiet_until: float = 0.0


#: The order of readiness conditions in ``reasons`` (the first failing one is ``reason``). A condition is
#: named ``kind`` or ``kind:detail`` (one per stopped target); a kind not listed here comes last.
READINESS_ORDER = ("shutdown", "configuration", "target", "langfuse", "langfuse-requests", "database")


def _order(condition: str) -> tuple[int, str]:
    kind = condition.partition(":")[0]
    return (READINESS_ORDER.index(kind) if kind in READINESS_ORDER else len(READINESS_ORDER), condition)


def _shown(reason: str, default: str) -> str:
    """A reason as shown: redacted (it may quote a response) and cut to :data:`MAX_REASON_CHARS`."""
    return redact_text(reason.strip() or default)[:MAX_REASON_CHARS]


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
        #: Why the worker is not ready, by condition (see READINESS_ORDER); empty = ready.
        self._not_ready: dict[str, str] = {
            "configuration": "configuration not loaded",
            "langfuse": "Langfuse: Langfuse not checked yet",
        }
        self._stopped: dict[str, str] = {}
        self._langfuse_ok: bool | None = None
        self._langfuse_reason = "Langfuse not checked yet"
        self._langfuse_checked: float | None = None
        self._langfuse_retrying: str | None = None
        #: The shared database of a fleet (None: the worker has none — SQLite state).
        self._database_ok: bool | None = None
        self._database_reason = ""
        self._started = clock()

    # -- readiness conditions --------------------------------------------------------------------------

    def not_ready(self, condition: str, reason: str) -> None:
        """Not ready while ``condition`` holds; ``reason`` is what ``/readyz`` shows (as given)."""
        with self._lock:
            self._not_ready[condition] = reason

    def ready_again(self, condition: str) -> None:
        with self._lock:
            self._not_ready.pop(condition, None)

    # -- what the worker reports -----------------------------------------------------------------------

    def config_loaded(self) -> None:
        self.ready_again("configuration")

    def watch(self, target: str, interval: float) -> None:
        """Expect ticks of ``target`` every ``interval`` seconds from now on (call before the scheduler starts)."""
        with self._lock:
            self._targets.setdefault(target, _Target(interval, self._clock())).interval = interval

    def tick_started(self, target: str, interval: float) -> None:
        with self._lock:
            state = self._targets.setdefault(target, _Target(interval, self._clock()))
            state.interval = interval
            state.last_activity = self._clock()
            state.quiet_until = 0.0
            state.ticks += 1

    def progress(self, target: str, wait: float = 0.0) -> None:
        """A long tick is still moving (e.g. after each page, chunk or batch): activity for liveness.
        ``wait``: it now pauses that many seconds on purpose (a retry's back-off), so quiet is expected
        until then — whatever else of the tick reports meanwhile (two batches may wait at once)."""
        with self._lock:
            state = self._targets.get(target)
            if state is not None:
                now = self._clock()
                state.last_activity = now
                state.quiet_until = max(state.quiet_until, now + wait)

    def langfuse_ok(self, detail: str = "Langfuse reachable, credentials valid") -> None:
        with self._lock:
            self._langfuse_ok = True
            self._langfuse_reason = detail
            self._langfuse_checked = self._clock()
            self._not_ready.pop("langfuse", None)

    def langfuse_failed(self, reason: str) -> None:
        """The last check failed: unreachable, 401/403, 5xx… ``reason`` is shown (redacted, shortened)."""
        text = _shown(reason, "Langfuse check failed")
        with self._lock:
            self._langfuse_ok = False
            self._langfuse_reason = text
            self._langfuse_checked = self._clock()
            self._not_ready["langfuse"] = f"Langfuse: {text}"

    def langfuse_retrying(self, endpoint: str, outcome: str) -> None:
        """A Langfuse request failed and is being retried: not ready until a request is answered again
        (a worker waiting out Langfuse's trouble is not doing its job, though it is alive)."""
        text = _shown(f"retrying {endpoint} after {_outcome_text(outcome)}", "retrying")
        with self._lock:
            self._langfuse_retrying = text
            self._not_ready["langfuse-requests"] = f"Langfuse: {text}"

    def langfuse_answered(self) -> None:
        """A Langfuse request was answered (2xx): requests go through again."""
        with self._lock:
            if self._langfuse_retrying is not None:
                self._langfuse_retrying = None
                self._not_ready.pop("langfuse-requests", None)

    def database_ok(self, detail: str = "database reachable") -> None:
        with self._lock:
            self._database_ok = True
            self._database_reason = detail
            self._not_ready.pop("database", None)

    def database_failed(self, reason: str) -> None:
        """The state's database did not answer (the fleet's PostgreSQL: state and queue) or took no write
        (the SQLite file: disk full, read-only): not ready until it does."""
        text = _shown(reason, "database check failed")
        with self._lock:
            self._database_ok = False
            self._database_reason = text
            self._not_ready["database"] = f"database: {text}"

    def target_stopped(self, target: str, reason: str) -> None:
        """``target`` cannot work against this server (e.g. a request the server refuses as a whole):
        not ready, with the reason, until restarted; its ticks no longer count for liveness."""
        text = _shown(reason, "stopped")
        with self._lock:
            self._stopped[target] = text
            self._targets.pop(target, None)
            self._not_ready[f"target:{target}"] = f"target {target} stopped: {text}"

    def shutting_down(self) -> None:
        """SIGTERM received: not ready any more (liveness unaffected while the batch in hand finishes)."""
        self.not_ready("shutdown", "shutting down")

    # -- what the probes answer ----------------------------------------------------------------------------

    def liveness(self) -> Probe:
        now = self._clock()
        with self._lock:
            targets = {}
            stalled = []
            for name, state in sorted(self._targets.items()):
                quiet = max(0.0, state.quiet_until - state.last_activity)
                limit = max(self._intervals * state.interval, self._min) + quiet
                idle = now - state.last_activity
                targets[name] = {
                    "interval_seconds": state.interval,
                    "idle_seconds": round(idle, 3),
                    "limit_seconds": limit,
                    "ticks": state.ticks,
                }
                if state.quiet_until > now:
                    targets[name]["waiting_seconds"] = round(state.quiet_until - now, 3)
                if idle > limit:
                    stalled.append(f"{name} (no progress for {idle:.0f}s, limit {limit:.0f}s)")
        details = {"uptime_seconds": round(now - self._started, 3), "targets": targets}
        if stalled:
            return Probe(False, "scheduler stalled: " + ", ".join(stalled), details)
        return Probe(True, "alive" if targets else "alive (no target scheduled yet)", details)

    def readiness(self) -> Probe:
        now = self._clock()
        with self._lock:
            checked = None if self._langfuse_checked is None else round(now - self._langfuse_checked, 3)
            reasons = [self._not_ready[c] for c in sorted(self._not_ready, key=_order)]
            details: dict[str, Any] = {
                "reasons": reasons,
                "config_loaded": "configuration" not in self._not_ready,
                "langfuse": {
                    "ok": self._langfuse_ok,
                    "reason": self._langfuse_reason,
                    "checked_seconds_ago": checked,
                    "retrying": self._langfuse_retrying,
                },
                "stopped_targets": dict(self._stopped),
            }
            if self._database_ok is not None:
                details["database"] = {"ok": self._database_ok, "reason": self._database_reason}
        if reasons:
            return Probe(False, reasons[0], details)
        return Probe(True, "ready", details)

    @property
    def langfuse_up(self) -> bool | None:
        """The last Langfuse check's outcome; None before the first check."""
        with self._lock:
            return self._langfuse_ok


def _outcome_text(outcome: str) -> str:
    """A request's outcome as counted (``503``, ``timeout``, ``connection_error``) in words."""
    return f"HTTP {outcome}" if outcome.isdigit() else outcome.replace("_", " ")

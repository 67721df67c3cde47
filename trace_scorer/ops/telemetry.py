"""Prometheus metrics of the worker: the one module that imports ``prometheus_client``.

The worker, the sources, the Langfuse adapter and the judge call the small typed methods of
:class:`Telemetry` (``telemetry.traces_scored("agent", 12)``); nothing else knows metric names, label
names or the client library. Each :class:`Telemetry` owns its own ``CollectorRegistry`` (no global
state: tests and several workers in one process stay isolated); ``/metrics`` serves that registry.

Conventions (https://prometheus.io/docs/practices/naming/): every name starts with ``trace_scorer_``,
counters end in ``_total``, units are base units in the name (``_seconds``, ``_bytes``); costs are in US
dollars (``_usd``), the currency of providers' price tables.

Label values that come from data rather than configuration (skip reasons, endpoints, models, statuses)
go through a cardinality guard: reasons and statuses are reduced to slugs (``[a-z0-9_.-]``) and, past
:data:`MAX_LABEL_VALUES` distinct values per label, folded into ``"other"`` — a bug that puts a trace
id into a label must not take down the Prometheus server that scrapes us.

The full list of metrics with their meaning is in docs/deploy.md ("Metrics"); keep the two in step.
"""

from __future__ import annotations

import platform
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from trace_scorer import __version__
from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.ops.health import Health

PREFIX = "trace_scorer"

#: Distinct values one free-form label may take before new ones are reported as "other".
MAX_LABEL_VALUES = 64

#: Tick durations: a tick is a few requests and some scoring, or minutes of judge calls on a backlog.
TICK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
#: Judge call durations: LLM round trips.
JUDGE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

#: Which waits count as rate limiting (the server or provider asked us to slow down, or our own
#: per-minute budget held a request back) and which as back-off after an error.
WaitReason = Literal["rate_limit", "budget", "backoff"]
#: What a target scores as one sample (its ``scope``): what its scored / failed / skipped counters count.
Unit = Literal["trace", "session", "observation"]
Service = Literal["langfuse", "judge"]

_UNSAFE = re.compile(r"[^a-z0-9_.\-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


class _LabelGuard:
    """Bounded label values per label name (see the module docstring).

    ``reason`` and ``status`` values become slugs (``"Trace Not Finished!"`` → ``trace_not_finished``);
    names (targets, endpoints, models, metrics) are kept as written, cut to 100 characters.
    """

    _SLUGGED = frozenset({"reason", "status"})

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        #: Names already kept as written: the same model or target is labelled on every judge call and
        #: score, and cleaning it again was ~1 % of a judged trace's CPU. No larger than ``_seen``.
        self._kept: set[tuple[str, str]] = set()

    def __call__(self, label: str, value: object) -> str:
        if isinstance(value, str) and (label, value) in self._kept:
            return value
        text = self._guarded(label, value)
        if text == value and text != "other" and label not in self._SLUGGED:
            self._kept.add((label, text))
        return text

    def _guarded(self, label: str, value: object) -> str:
        text = str(value).strip()
        if label in self._SLUGGED:
            text = _UNSAFE.sub("_", text.lower())[:64].strip("_")
        else:
            text = _CONTROL.sub(" ", text)[:100]
        text = text or "unknown"
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if text in seen:
                return text
            if len(seen) >= self._limit:
                return "other"
            seen.add(text)
            return text


#: How many metric children :meth:`Telemetry._child` keeps at hand.
_MAX_CHILDREN = 4096


def _timestamp(moment: datetime | float) -> float:
    return moment.timestamp() if isinstance(moment, datetime) else float(moment)


class _LagCollector(Collector):
    """``scoring_lag_seconds`` computed at scrape time: now − start of the newest scored trace."""

    def __init__(self, newest: Callable[[], Mapping[str, float]], clock: Callable[[], float]) -> None:
        self._newest = newest
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            f"{PREFIX}_scoring_lag_seconds",
            "Seconds between now and the start time of the newest trace scored for the target.",
            labels=["target"],
        )
        now = self._clock()
        for target, started in sorted(self._newest().items()):
            lag.add_metric([target], max(0.0, now - started))
        yield lag


class _HealthCollector(Collector):
    """The probes' state as gauges, computed at scrape time."""

    def __init__(self, health: Health) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            f"{PREFIX}_up", "1 when the probe (liveness, readiness) passes, else 0.", labels=["probe"]
        )
        up.add_metric(["liveness"], float(self._health.liveness().ok))
        up.add_metric(["readiness"], float(self._health.readiness().ok))
        yield up
        langfuse = GaugeMetricFamily(
            f"{PREFIX}_langfuse_up",
            "1 when the last Langfuse check succeeded, 0 when it failed (absent before the first check).",
        )
        state = self._health.langfuse_up
        if state is not None:
            langfuse.add_metric([], float(state))
        yield langfuse


class Telemetry:
    """The worker's metrics. One instance per worker; pass it to whatever needs to count.

    ``clock`` (wall-clock seconds since the epoch) is injectable for tests of the scoring lag.
    ``process_metrics`` adds the standard ``process_*``, ``python_gc_*`` and ``python_info`` series.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        process_metrics: bool = True,
        max_label_values: int = MAX_LABEL_VALUES,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._label = _LabelGuard(max_label_values)
        #: Metric children of the per-call and per-sample counters, by metric and raw label values
        #: (:meth:`_child`): prometheus' ``labels()`` (a lock and a lookup each) four times a judge call and
        #: three times a trace was ~1 % of a trace's CPU each. Bounded by :data:`_MAX_CHILDREN`.
        self._children: dict[tuple[object, ...], Any] = {}
        self._newest_lock = threading.Lock()
        self._newest: dict[str, float] = {}
        r = self.registry
        p = PREFIX

        if process_metrics:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
        info = Info(f"{p}_build", "Version of trace-scorer and of the Python running it.", registry=r)
        info.info({"version": __version__, "python": platform.python_version()})

        # -- work: traces and scores, per target --------------------------------------------------
        self._seen = Counter(
            f"{p}_traces_seen_total", "Traces (or dataset-run items) read from Langfuse.", ["target"], registry=r
        )
        # A target's samples are counted under their own name (traces_*, sessions_*, observations_*): a
        # session or an observation is not a trace, and a Prometheus user reads the name, not the docs.
        # Trace targets keep the traces_* series they always had.
        self._scored: dict[Unit, Counter] = {}
        self._failed: dict[Unit, Counter] = {}
        self._skipped: dict[Unit, Counter] = {}
        for unit in ("trace", "session", "observation"):
            them = f"{unit}s"
            self._scored[unit] = Counter(
                f"{p}_{them}_scored_total",
                f"{them.capitalize()} with at least one score posted to Langfuse (and none failed); one whose every "
                f"metric was skipped counts under {them}_skipped_total, reason nothing_to_score.",
                ["target"],
                registry=r,
            )
            self._failed[unit] = Counter(
                f"{p}_{them}_failed_total",
                f"{them.capitalize()} whose scoring failed (e.g. every judge model down); retried later.",
                ["target"],
                registry=r,
            )
            self._skipped[unit] = Counter(
                f"{p}_{them}_skipped_total",
                f"{them.capitalize()} with no score posted, by reason (nothing_to_score: every metric skipped, "
                "its inputs absent).",
                ["target", "reason"],
                registry=r,
            )
        self._metric_results = Counter(
            f"{p}_metric_results_total",
            "Per-trace metric and KPI outcomes: scored, skipped (inputs absent), failed.",
            ["target", "metric", "outcome"],
            registry=r,
        )
        self._posted = Counter(f"{p}_scores_posted_total", "Scores accepted by Langfuse.", ["target"], registry=r)
        self._rejected = Counter(
            f"{p}_scores_rejected_total",
            "Scores not accepted: invalid before sending, or rejected by Langfuse (207).",
            ["target", "reason"],
            registry=r,
        )
        self._backlog = Gauge(
            f"{p}_backlog_traces",
            "Traces waiting to be scored, where the source knows (absent otherwise).",
            ["target"],
            registry=r,
        )
        self._newest_ts = Gauge(
            f"{p}_newest_scored_trace_timestamp_seconds",
            "Start time (Unix seconds) of the newest trace scored for the target.",
            ["target"],
            registry=r,
        )
        r.register(_LagCollector(self._newest_snapshot, clock))
        self._queue_series: set[tuple[str, str, str]] = set()
        self._queue_jobs = Gauge(
            f"{p}_queue_jobs",
            "Distributed mode: the fleet's jobs in the queue by target, kind (plan, batch) and "
            "state (todo, doing, failed); the same on every replica.",
            ["target", "kind", "state"],
            registry=r,
        )

        # -- ticks ----------------------------------------------------------------------------------
        self._ticks = Counter(
            f"{p}_ticks_total", "Scheduler ticks, by outcome (ok, error).", ["target", "outcome"], registry=r
        )
        self._tick_seconds = Histogram(
            f"{p}_tick_duration_seconds",
            "Wall time of one tick of a target.",
            ["target"],
            buckets=TICK_BUCKETS,
            registry=r,
        )
        self._last_success = Gauge(
            f"{p}_last_successful_tick_timestamp_seconds",
            "When (Unix seconds) the target's last tick that ended without error ended.",
            ["target"],
            registry=r,
        )
        self._clock_steps = Counter(
            f"{p}_clock_steps_total",
            "Steps of the wall clock seen between ticks (it moved more or less than the "
            "monotonic clock), by direction (forward, backward).",
            ["direction"],
            registry=r,
        )

        # -- Langfuse API ---------------------------------------------------------------------------
        self._lf_requests = Counter(
            f"{p}_langfuse_requests_total",
            "HTTP requests to Langfuse (every attempt), by endpoint and status "
            "(HTTP code, or timeout / connection_error).",
            ["endpoint", "status"],
            registry=r,
        )
        self._lf_seconds = Histogram(
            f"{p}_langfuse_request_duration_seconds", "Duration of HTTP requests to Langfuse.", ["endpoint"], registry=r
        )
        self._lf_retries = Counter(
            f"{p}_langfuse_retries_total",
            "Langfuse requests retried, by endpoint and the failed attempt's status.",
            ["endpoint", "status"],
            registry=r,
        )

        # -- judges (LLM) ---------------------------------------------------------------------------
        self._judge_calls = Counter(
            f"{p}_judge_calls_total",
            "LLM judge calls, by model and outcome (ok, invalid answer, error).",
            ["model", "outcome"],
            registry=r,
        )
        self._judge_seconds = Histogram(
            f"{p}_judge_call_duration_seconds",
            "Duration of LLM judge calls.",
            ["model"],
            buckets=JUDGE_BUCKETS,
            registry=r,
        )
        self._judge_retries = Counter(
            f"{p}_judge_retries_total",
            "LLM judge calls retried, by model and the failed attempt's status.",
            ["model", "status"],
            registry=r,
        )
        self._tokens = Counter(
            f"{p}_judge_tokens_total",
            "Tokens used by LLM judges, by model and kind (prompt, completion).",
            ["model", "kind"],
            registry=r,
        )
        self._cost = Counter(
            f"{p}_judge_cost_usd_total",
            "Cost of LLM judge calls in US dollars, from the configured price table.",
            ["model"],
            registry=r,
        )

        # -- waiting ----------------------------------------------------------------------------------
        self._wait = Counter(
            f"{p}_wait_seconds_total",
            "Seconds spent waiting before requests: rate_limit (429 / Retry-After), budget (our "
            "own requests-per-minute limit), backoff (after 5xx and timeouts).",
            ["service", "reason"],
            registry=r,
        )

    def _newest_snapshot(self) -> dict[str, float]:
        with self._newest_lock:
            return dict(self._newest)

    def exposition(self, accept: str) -> tuple[bytes, str]:
        """The registry in the format an ``Accept`` header asks for (Prometheus text, or OpenMetrics) and
        its content type: prometheus-client's own encoders, for ``/metrics``."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    def export_health(self, health: Health) -> None:
        """Also export ``trace_scorer_up{probe}`` and ``trace_scorer_langfuse_up`` from ``health``."""
        self.registry.register(_HealthCollector(health))

    # -- work -----------------------------------------------------------------------------------------

    def traces_seen(self, target: str, n: int = 1) -> None:
        self._seen.labels(self._label("target", target)).inc(n)

    def traces_scored(self, target: str, n: int = 1, *, unit: Unit = "trace") -> None:
        """``n`` samples of the target scored: traces, or its scope's ``unit`` (``sessions_scored_total``)."""
        self._scored[unit].labels(self._label("target", target)).inc(n)

    def traces_skipped(self, target: str, reason: str, n: int = 1, *, unit: Unit = "trace") -> None:
        """``reason``: a short stable word, e.g. ``not_finished``, ``sampled_out``, ``already_scored``,
        ``nothing_to_score`` (every metric skipped: done, but no score posted). ``unit``: what was skipped
        (a session target skips traces without a session, and sessions not quiet yet)."""
        self._skipped[unit].labels(self._label("target", target), self._label("reason", reason)).inc(n)

    def traces_failed(self, target: str, n: int = 1, *, unit: Unit = "trace") -> None:
        self._failed[unit].labels(self._label("target", target)).inc(n)

    def metric_outcomes(self, target: str, outcomes: Mapping[str, Outcome]) -> None:
        """Count one sample's (or group's) results by score name: call it with ``SampleResult.outcomes``."""
        for name, outcome in outcomes.items():
            kind = "scored" if isinstance(outcome, Score) else "skipped" if isinstance(outcome, Skipped) else "failed"
            self._child(self._metric_results, ("target", target), ("metric", name), kind).inc()

    def scores_posted(self, target: str, n: int) -> None:
        self._posted.labels(self._label("target", target)).inc(n)

    def scores_rejected(self, target: str, reason: str, n: int = 1) -> None:
        """``reason``: ``invalid`` (caught before sending) or ``rejected`` (Langfuse's 207), or finer."""
        self._rejected.labels(self._label("target", target), self._label("reason", reason)).inc(n)

    def trace_scored_at(self, target: str, start_time: datetime | float) -> None:
        """Report the start time of a scored trace; the newest one per target drives the scoring lag."""
        t = self._label("target", target)
        started = _timestamp(start_time)
        with self._newest_lock:
            if started <= self._newest.get(t, float("-inf")):
                return
            self._newest[t] = started
        self._newest_ts.labels(t).set(started)

    def backlog(self, target: str, size: int | None) -> None:
        """Traces known to be waiting; ``None`` when the source cannot tell (the series is removed)."""
        t = self._label("target", target)
        if size is None:
            with suppress(KeyError):  # never set
                self._backlog.remove(t)
        else:
            self._backlog.labels(t).set(size)

    def queue_jobs(self, counts: dict[tuple[str, str, str], int]) -> None:
        """The fleet's queue by (target, kind, state): every series set, those gone reset to 0."""
        seen = {labels: 0 for labels in self._queue_series}
        seen.update(counts)
        for (target, kind, state), count in seen.items():
            self._queue_jobs.labels(self._label("target", target), kind, state).set(count)
        self._queue_series = set(seen)

    # -- ticks ------------------------------------------------------------------------------------------

    def tick_finished(self, target: str, duration_seconds: float, *, ok: bool) -> None:
        t = self._label("target", target)
        self._tick_seconds.labels(t).observe(duration_seconds)
        self._ticks.labels(t, "ok" if ok else "error").inc()
        if ok:
            self._last_success.labels(t).set(self._clock())

    @contextmanager
    def tick(self, target: str) -> Iterator[None]:
        """Time a tick: ``with telemetry.tick("agent"): ...`` (an exception counts as an error tick)."""
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            self.tick_finished(target, time.perf_counter() - start, ok=ok)

    def clock_step(self, seconds: float) -> None:
        """The wall clock stepped by ``seconds`` (negative: back) against the monotonic clock."""
        self._clock_steps.labels("forward" if seconds > 0 else "backward").inc()

    # -- Langfuse ------------------------------------------------------------------------------------

    def langfuse_request(self, endpoint: str, status: int | str, duration_seconds: float | None = None) -> None:
        """One HTTP attempt. ``endpoint``: the route template (``GET /api/public/v2/observations``), never
        a path with ids in it; ``status``: the HTTP code, or ``timeout`` / ``connection_error``."""
        e = self._label("endpoint", endpoint)
        self._lf_requests.labels(e, self._label("status", status)).inc()
        if duration_seconds is not None:
            self._lf_seconds.labels(e).observe(duration_seconds)

    def langfuse_retry(self, endpoint: str, status: int | str, wait_seconds: float) -> None:
        """A retry after a failed attempt with ``status``, after waiting ``wait_seconds``."""
        self._lf_retries.labels(self._label("endpoint", endpoint), self._label("status", status)).inc()
        self.waited("langfuse", _wait_reason(status), wait_seconds)

    # -- judges -----------------------------------------------------------------------------------------

    def judge_call(
        self,
        model: str,
        outcome: Literal["ok", "invalid", "error"] = "ok",
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = None,
        duration_seconds: float | None = None,
    ) -> None:
        """One LLM call that got an answer (``ok``), an answer that failed validation (``invalid``), or
        none after retries (``error``). ``model``: ``provider/model-id``."""
        m = ("model", model)
        self._child(self._judge_calls, m, outcome).inc()
        if prompt_tokens:
            self._child(self._tokens, m, "prompt").inc(prompt_tokens)
        if completion_tokens:
            self._child(self._tokens, m, "completion").inc(completion_tokens)
        if cost_usd:
            self._child(self._cost, m).inc(cost_usd)
        if duration_seconds is not None:
            self._child(self._judge_seconds, m).observe(duration_seconds)

    def _child(self, metric: Counter | Histogram, *labels: tuple[str, str] | str) -> Any:
        """``metric``'s child for ``labels``, made once: a ``(label, value)`` pair is a name the label
        guard cleans, a plain string a fixed value. Kept in ``_children`` up to :data:`_MAX_CHILDREN`."""
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = metric.labels(*(self._label(*value) if isinstance(value, tuple) else value for value in labels))
            if len(self._children) < _MAX_CHILDREN:
                self._children[key] = child
        return child

    def judge_retry(self, model: str, status: int | str, wait_seconds: float) -> None:
        """A judge call's HTTP attempt that failed with ``status`` (HTTP code, ``timeout``, ``connection_error``)
        and is tried again after ``wait_seconds``. ``model``: ``provider/model-id``."""
        self._judge_retries.labels(self._label("model", model), self._label("status", status)).inc()
        self.waited("judge", _wait_reason(status), wait_seconds)

    # -- waiting ------------------------------------------------------------------------------------------

    def waited(self, service: Service, reason: WaitReason, seconds: float) -> None:
        """Seconds spent waiting before a request (``budget``: our own per-minute limit held it back)."""
        if seconds > 0:
            self._wait.labels(service, reason).inc(seconds)


def _wait_reason(status: int | str) -> WaitReason:
    return "rate_limit" if str(status) == "429" else "backoff"

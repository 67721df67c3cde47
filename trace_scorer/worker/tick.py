"""One tick of a target: its context (:class:`Tick`), and what it did (:class:`TickReport`: logged as one
``tick`` event, exported as metrics)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from trace_scorer.ops.telemetry import Telemetry, Unit
from trace_scorer.scoring.plan import TargetPlan


@dataclass
class TickReport:
    """What one tick did: logged as one event, exported as metrics.

    ``unit`` is what the target scores as one sample (its scope): ``scored``, ``failed`` and
    ``unit_skipped`` count those; ``seen`` and ``skipped`` count the traces listed. A session target's
    ``deferred`` counts sessions not quiet yet, any other target's traces not finished.
    """

    target: str
    unit: Unit = "trace"
    window: str = ""
    seen: int = 0
    scored: int = 0
    deferred: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    #: Samples of a session or observation target with no score posted, by reason (a trace target's
    #: go to ``skipped``: see :meth:`skip_sample`).
    unit_skipped: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    gave_up: int = 0
    scores_posted: int = 0
    scores_rejected: int = 0
    runs_posted: int = 0

    def skip_sample(self, reason: str, n: int = 1) -> None:
        """``n`` samples (traces, sessions or observations: the target's unit) skipped for ``reason``."""
        (self.skipped if self.unit == "trace" else self.unit_skipped)[reason] += n

    def count_skipped(self, telemetry: Telemetry) -> None:
        """``traces_skipped_total`` (and ``sessions_`` / ``observations_skipped_total``) by reason, as the
        tick event logs them (deferred: "not finished")."""
        for reason, count in self.skipped.items():
            telemetry.traces_skipped(self.target, reason, count)
        for reason, count in self.unit_skipped.items():
            telemetry.traces_skipped(self.target, reason, count, unit=self.unit)
        if self.deferred:
            deferred: Unit = "session" if self.unit == "session" else "trace"
            telemetry.traces_skipped(self.target, "not finished", self.deferred, unit=deferred)

    def as_log(self) -> dict[str, object]:
        extra: dict[str, object] = {}
        if self.unit != "trace":
            extra[f"{self.unit}s_skipped_by_reason"] = dict(self.unit_skipped)
        return {
            "unit": self.unit,
            "window": self.window,
            "traces_seen": self.seen,
            "traces_scored": self.scored,
            "traces_deferred": self.deferred,
            "traces_skipped": sum(self.skipped.values()),
            "skipped_by_reason": dict(self.skipped),
            "traces_failed": self.failed,
            "traces_given_up": self.gave_up,
            "scores_posted": self.scores_posted,
            "scores_rejected": self.scores_rejected,
            "runs_posted": self.runs_posted,
            **extra,
        }


@dataclass(frozen=True)
class Tick:
    """One tick of a target: made once where the tick starts and passed down whole, so the functions it
    calls take one argument instead of ``now``, the report, the stop signal, the plan and the telemetry
    one by one (and no source reaches through its scorer for them)."""

    #: The time the tick goes by (the server's, when the local clock is off it).
    now: datetime
    report: TickReport
    #: Set when the worker stops: no new batch is started.
    stop: asyncio.Event
    plan: TargetPlan
    telemetry: Telemetry

"""What one tick of a target did: logged as one ``tick`` event, exported as metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from trace_scorer.ops.telemetry import Telemetry


@dataclass
class TickReport:
    """What one tick did: logged as one event, exported as metrics."""

    target: str
    window: str = ""
    seen: int = 0
    scored: int = 0
    deferred: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    gave_up: int = 0
    scores_posted: int = 0
    scores_rejected: int = 0
    runs_posted: int = 0

    def count_skipped(self, telemetry: Telemetry) -> None:
        """``traces_skipped_total`` by reason, as the tick event logs them (deferred: "not finished")."""
        for reason, count in self.skipped.items():
            telemetry.traces_skipped(self.target, reason, count)
        if self.deferred:
            telemetry.traces_skipped(self.target, "not finished", self.deferred)

    def as_log(self) -> dict[str, object]:
        return {
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
        }

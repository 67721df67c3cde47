"""Counters of requests to Langfuse, by endpoint and outcome: for the tick log and Prometheus."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RequestStats:
    """Every HTTP attempt is counted once in ``requests``; every wait before a retry in ``retries``.

    Keys are ``(endpoint label, outcome)``: the outcome is the HTTP status as a string, or
    ``"timeout"`` / ``"connection_error"`` when no answer came.
    """

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    retries: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Seconds spent waiting before retries (back-off and Retry-After).
    retry_wait_seconds: float = 0.0
    #: Seconds spent waiting for the per-minute request budget.
    budget_wait_seconds: float = 0.0
    #: Told of every request (endpoint, outcome, seconds it took when known) and retry (endpoint,
    #: outcome, wait): the worker's metrics.
    on_request: Callable[[str, str, float | None], None] | None = None
    on_retry: Callable[[str, str, float], None] | None = None

    def count_request(self, endpoint: str, outcome: str, duration: float | None = None) -> None:
        self.requests[(endpoint, outcome)] += 1
        if self.on_request is not None:
            self.on_request(endpoint, outcome, duration)

    def count_retry(self, endpoint: str, outcome: str, wait: float) -> None:
        self.retries[(endpoint, outcome)] += 1
        self.retry_wait_seconds += wait
        if self.on_retry is not None:
            self.on_retry(endpoint, outcome, wait)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def total_retries(self) -> int:
        return sum(self.retries.values())

    def snapshot(self) -> dict[str, object]:
        """A plain, JSON-ready copy (for a log event or an exporter: none uses it yet). For tests and benches only."""
        return {
            "requests": [
                {"endpoint": e, "outcome": o, "count": n} for (e, o), n in sorted(self.requests.items())
            ],
            "retries": [
                {"endpoint": e, "outcome": o, "count": n} for (e, o), n in sorted(self.retries.items())
            ],
            "total_requests": self.total_requests,
            "total_retries": self.total_retries,
            "retry_wait_seconds": round(self.retry_wait_seconds, 3),
            "budget_wait_seconds": round(self.budget_wait_seconds, 3),
        }

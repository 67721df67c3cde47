"""Fault injection and the bookkeeping tests assert on: latency, 429 + Retry-After, 5xx, dropped
connections; when each 429 was sent and whether its retry came back too early.

Faults are drawn per request from a seeded generator (rates), or taken from a script ("the next
``POST /api/public/scores`` gets a 429 with Retry-After 0.3"), which comes first. They apply to the API
routes named in ``routes`` (route labels such as ``"GET /api/public/v2/observations"`` or bare paths
such as ``"/api/public/scores"``), or to every API route when ``routes`` is None; never to the stand-in's
control routes.

**Early requests.** A retry is recognised by its signature: method, request target (path and query) and
a digest of the body — what a client resends after a 429. When a request with the signature of a 429'd
request arrives before ``sent + Retry-After - tolerance``, it is recorded in ``early``. Two different
callers sending byte-identical requests at once would look like one retrying; the clients under test
do not (score batches differ, reads differ by window or cursor).
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from standins.settings import refuse_unknown

#: A request may arrive this much before its Retry-After has passed without counting as early: the
#: server notes the time before writing the answer, asyncio timers may fire up to a clock tick early.
DEFAULT_TOLERANCE = 0.005
#: Most 429 records kept (the count goes on beyond).
MAX_RECORDS = 20_000

KINDS = ("429", "5xx", "drop", "reset", "latency", "timeout", "answer", "hold")


@dataclass
class FaultConfig:
    """What to inject, as rates in [0, 1] per request of the routes it applies to."""

    #: Seconds added before every answer (all routes but the control routes).
    latency: float = 0.0
    #: When set, the latency is uniform in ``[latency, latency_max]`` instead of fixed.
    latency_max: float | None = None
    rate_429: float = 0.0
    #: Seconds in the ``Retry-After`` header of injected 429s (fractions are a test convenience; Langfuse
    #: and OpenAI send whole seconds).
    retry_after: float = 1.0
    rate_5xx: float = 0.0
    status_5xx: int = 503
    #: Answers cut half-way through the body (headers sent, then the connection closed).
    rate_drop: float = 0.0
    #: Connections closed before any answer.
    rate_reset: float = 0.0
    #: Plan limit: at most this many requests (of the routes below) per fixed window that starts with its
    #: first request, as Langfuse Cloud counts; beyond it, 429 with Retry-After = the rest of the
    #: window. 0: no limit.
    requests_per_window: int = 0
    window_seconds: float = 60.0
    #: Routes the rates apply to (labels or paths); None: every API route.
    routes: list[str] | None = None
    seed: int = 0

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FaultConfig:
        refuse_unknown(cls, values, "fault settings")
        config = cls(**values)
        for name in ("rate_429", "rate_5xx", "rate_drop", "rate_reset"):
            rate = getattr(config, name)
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {rate}")
        if config.rate_429 + config.rate_5xx + config.rate_drop + config.rate_reset > 1.0:
            raise ValueError("the fault rates add up to more than 1")
        return config

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScriptedFault:
    """One fault for the next matching request: ``kind`` is 429, 5xx, drop, reset, latency, timeout (no
    answer: the connection is held until the client gives up), answer (this ``status`` with ``body`` and
    ``headers``, e.g. a 401, a 429 with an HTTP-date Retry-After, a 422 — as a server or a proxy sends it)
    or hold (answered normally once the test releases the stand-in, ``handle.release()``, for good: a hold
    after that does not wait; ``stats()["held"]`` counts the requests waiting — tests wait for events)."""

    kind: str
    #: Route label or path it waits for; None: the next API request whatever its route.
    route: str | None = None
    retry_after: float = 1.0
    status: int = 503
    #: For ``latency``: seconds to wait before answering normally.
    seconds: float = 0.0
    #: For ``answer``: the JSON body (None: ``{"message": "scripted answer (stand-in)"}``) and headers.
    body: Any = None
    headers: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r} is not one of {KINDS}")


@dataclass
class Decision:
    kind: str | None = None
    latency: float = 0.0
    retry_after: float = 0.0
    status: int = 0
    #: The scripted ``answer`` (kind "answer").
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def route_matches(route: str, selectors: list[str] | None) -> bool:
    """``route`` is a label ``"METHOD /path/template"``; a selector is a label or a bare path."""
    if selectors is None:
        return True
    path = route.split(" ", 1)[-1]
    return any(selector in (route, path) for selector in selectors)


class FaultEngine:
    def __init__(self, config: FaultConfig | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or FaultConfig()
        self._random = random.Random(self.config.seed)
        self.script: deque[ScriptedFault] = deque()
        self._clock = clock
        self._window_start: float | None = None
        self._window_count = 0

    def configure(self, config: FaultConfig) -> None:
        self.config = config
        self._random = random.Random(config.seed)
        self._window_start = None
        self._window_count = 0

    def _over_plan(self) -> float | None:
        """Seconds left in the current window when this request is over the plan's limit, else None."""
        config = self.config
        if config.requests_per_window <= 0:
            return None
        now = self._clock()
        if self._window_start is None or now >= self._window_start + config.window_seconds:
            self._window_start, self._window_count = now, 0
        self._window_count += 1
        if self._window_count <= config.requests_per_window:
            return None
        return max(0.001, self._window_start + config.window_seconds - now)

    def add_script(self, faults: list[ScriptedFault]) -> None:
        self.script.extend(faults)

    def decide(self, route: str) -> Decision:
        config = self.config
        decision = Decision()
        if config.latency_max is not None and config.latency_max > config.latency:
            decision.latency = self._random.uniform(config.latency, config.latency_max)
        else:
            decision.latency = config.latency
        for index, scripted in enumerate(self.script):
            if scripted.route is None or route_matches(route, [scripted.route]):
                del self.script[index]
                if scripted.kind == "latency":
                    decision.latency += scripted.seconds
                    return decision
                decision.kind = scripted.kind
                decision.retry_after = scripted.retry_after
                decision.status = scripted.status
                decision.body = scripted.body
                decision.headers = dict(scripted.headers or {})
                return decision
        if not route_matches(route, config.routes):
            return decision
        wait = self._over_plan()
        if wait is not None:
            decision.kind = "429"
            decision.retry_after = math.ceil(wait) if config.window_seconds >= 1 else round(wait, 3)
            return decision
        draw = self._random.random()
        for kind, rate in (
            ("429", config.rate_429),
            ("5xx", config.rate_5xx),
            ("drop", config.rate_drop),
            ("reset", config.rate_reset),
        ):
            if draw < rate:
                decision.kind = kind
                decision.retry_after = config.retry_after
                decision.status = config.status_5xx
                return decision
            draw -= rate
        return decision


def signature(method: str, target: str, body: bytes) -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(method.encode())
    digest.update(b" ")
    digest.update(target.encode())
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()[:20]


@dataclass
class RateLimitLedger:
    """Every 429 sent (route, when, Retry-After), and every retry that came back before its time."""

    tolerance: float = DEFAULT_TOLERANCE
    #: Each 429: ``{"route", "at", "retry_after", "due"}`` (seconds since the server started).
    sent: list[dict[str, Any]] = field(default_factory=list)
    #: Each early retry: ``{"route", "at", "due", "early_by"}``.
    early: list[dict[str, Any]] = field(default_factory=list)
    sent_count: int = 0
    #: Retries of 429'd requests that waited long enough.
    honoured: int = 0
    _pending: dict[str, float] = field(default_factory=dict)

    def on_request(self, sig: str, route: str, at: float) -> None:
        due = self._pending.pop(sig, None)
        if due is None:
            return
        if at < due - self.tolerance:
            self.early.append(
                {"route": route, "at": round(at, 6), "due": round(due, 6), "early_by": round(due - at, 6)}
            )
        else:
            self.honoured += 1

    def on_429(self, sig: str, route: str, at: float, retry_after: float) -> None:
        due = at + retry_after
        self._pending[sig] = due
        self.sent_count += 1
        if len(self.sent) < MAX_RECORDS:
            self.sent.append({"route": route, "at": round(at, 6), "retry_after": retry_after, "due": round(due, 6)})

    def clear(self) -> None:
        self.sent.clear()
        self.early.clear()
        self._pending.clear()
        self.sent_count = 0
        self.honoured = 0


def format_retry_after(seconds: float) -> str:
    """Whole seconds as an integer (what servers send), fractions as a decimal."""
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"

"""What both stand-ins share: routing hooks, fault injection, counters, violations, the control API.

Control routes live under ``/_standin/`` (never faulted, never counted, not part of any contract):

- ``GET  /_standin/stats``: request counts by route and outcome, contract violations, unsupported
  requests, 429s sent and early retries, plus each stand-in's own figures;
- ``POST /_standin/faults``: ``{"config": {...FaultConfig}}`` replaces the rates,
  ``{"script": [{...ScriptedFault}]}`` queues one-off faults, ``{"clear_script": true}`` drops them;
- ``POST /_standin/reset``: clears counters, violations and the 429 ledger (not the data).

Each stand-in adds its own control routes (:meth:`StandinApp.control`).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from standins.faults import FaultConfig, FaultEngine, RateLimitLedger, ScriptedFault, signature
from standins.http import Request, Response

CONTROL_PREFIX = "/_standin/"
#: Most violation / unsupported messages kept.
MAX_MESSAGES = 1000


@dataclass
class Routed:
    """A request matched to a route: its label for counters, or an answer to give at once."""

    label: str
    template: str = ""
    params: dict[str, str] | None = None
    #: Set when the request is refused before faults apply (contract violation, unknown route, auth).
    answer: Response | None = None


class StandinApp:
    name = "standin"

    def __init__(self, faults: FaultConfig | None = None) -> None:
        self.faults = FaultEngine(faults)
        self.ledger = RateLimitLedger()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.violations: list[str] = []
        self.unsupported: list[str] = []
        self.violation_count = 0
        self.started = time.monotonic()
        self.started_wall = datetime.now(UTC)
        #: Requests held by a ``hold`` fault wait on this until the control route ``release`` sets it.
        self._release: asyncio.Event | None = None
        self.held = 0

    # --- hooks -------------------------------------------------------------------------------

    def route(self, request: Request) -> Routed:
        raise NotImplementedError

    async def serve(self, request: Request, routed: Routed) -> Response:
        raise NotImplementedError

    def error_response(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        return Response.json(status, {"message": message}, headers)

    def rate_limited(self, retry_after: float) -> Response:
        raise NotImplementedError

    async def control(self, request: Request, name: str) -> Response | None:
        """Stand-in specific control routes (``name`` is the path after ``/_standin/``)."""
        return None

    def extra_stats(self) -> dict[str, Any]:
        return {}

    # --- bookkeeping -------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the server started (the time base of the 429 ledger)."""
        return time.monotonic() - self.started

    def violation(self, message: str) -> None:
        self.violation_count += 1
        if len(self.violations) < MAX_MESSAGES:
            self.violations.append(message)

    def note_unsupported(self, message: str) -> None:
        if len(self.unsupported) < MAX_MESSAGES:
            self.unsupported.append(message)

    def stats(self) -> dict[str, Any]:
        by_route: dict[str, dict[str, int]] = {}
        for (route, outcome), count in sorted(self.counts.items()):
            by_route.setdefault(route, {})[outcome] = count
        return {
            "name": self.name,
            "uptime": round(self.now(), 3),
            "requests": by_route,
            "total_requests": sum(self.counts.values()),
            "violations": list(self.violations),
            "violation_count": self.violation_count,
            "unsupported": list(self.unsupported),
            "rate_limited": list(self.ledger.sent),
            "rate_limited_count": self.ledger.sent_count,
            "early": list(self.ledger.early),
            "retries_honoured": self.ledger.honoured,
            "faults": self.faults.config.to_dict(),
            "script_left": len(self.faults.script),
            "held": self.held,
            **self.extra_stats(),
        }

    def reset(self) -> None:
        self.counts.clear()
        self.violations.clear()
        self.unsupported.clear()
        self.violation_count = 0
        self.ledger.clear()

    def _released(self) -> asyncio.Event:
        """Set by the control route ``release`` (made in the server's own loop, on first use)."""
        if self._release is None:
            self._release = asyncio.Event()
        return self._release

    # --- the request path --------------------------------------------------------------------

    async def handle(self, request: Request) -> Response:
        if request.raw_path.startswith(CONTROL_PREFIX):
            return await self._control(request)
        routed = self.route(request)
        at = request.received - self.started
        sig = signature(request.method, request.target, request.body)
        self.ledger.on_request(sig, routed.label, at)
        if routed.answer is not None:
            self.counts[(routed.label, str(routed.answer.status))] += 1
            return routed.answer
        decision = self.faults.decide(routed.label)
        if decision.latency > 0:
            await asyncio.sleep(decision.latency)
        if decision.kind == "hold":
            self.held += 1
            try:
                await self._released().wait()
            finally:
                self.held -= 1
        if decision.kind == "reset":
            self.counts[(routed.label, "reset")] += 1
            return Response(drop="before")
        if decision.kind == "timeout":
            self.counts[(routed.label, "timeout")] += 1
            return Response(drop="hang")
        if decision.kind == "answer":
            self.counts[(routed.label, str(decision.status))] += 1
            body = decision.body if decision.body is not None else {"message": "scripted answer (stand-in)"}
            return Response.json(decision.status, body, decision.headers)
        if decision.kind == "429":
            # The time the answer leaves, not when the request came: the client's wait starts later still.
            self.ledger.on_429(sig, routed.label, self.now(), decision.retry_after)
            self.counts[(routed.label, "429")] += 1
            return self.rate_limited(decision.retry_after)
        if decision.kind == "5xx":
            self.counts[(routed.label, str(decision.status))] += 1
            return self.error_response(decision.status, "injected server error (stand-in)")
        response = await self.serve(request, routed)
        if decision.kind == "drop":
            response.drop = "mid"
            self.counts[(routed.label, "dropped")] += 1
        else:
            self.counts[(routed.label, str(response.status))] += 1
        return response

    async def _control(self, request: Request) -> Response:
        name = request.raw_path[len(CONTROL_PREFIX) :]
        try:
            if request.method == "GET" and name == "stats":
                return Response.json(200, self.stats())
            if request.method == "POST" and name == "faults":
                body = request.json() or {}
                if "config" in body:
                    self.faults.configure(FaultConfig.from_dict(body["config"]))
                if body.get("clear_script"):
                    self.faults.script.clear()
                if "script" in body:
                    self.faults.add_script([ScriptedFault(**item) for item in body["script"]])
                if "tolerance" in body:
                    self.ledger.tolerance = float(body["tolerance"])
                return Response.json(
                    200, {"faults": self.faults.config.to_dict(), "script_left": len(self.faults.script)}
                )
            if request.method == "POST" and name == "release":  # for good: later holds do not wait
                released = self.held
                self._released().set()
                return Response.json(200, {"released": released})
            if request.method == "POST" and name == "reset":
                self.reset()
                return Response.json(200, {"ok": True})
            answer = await self.control(request, name)
        except (ValueError, TypeError, KeyError) as error:
            return Response.json(400, {"message": f"control: {type(error).__name__}: {error}"})
        if answer is None:
            return Response.json(404, {"message": f"no control route {request.method} {request.raw_path}"})
        return answer

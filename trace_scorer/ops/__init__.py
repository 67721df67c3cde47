"""Operating the worker: Prometheus metrics, liveness/readiness, and the HTTP endpoints that serve them.

The worker builds one :class:`Ops` from ``settings.http`` and passes ``ops.telemetry`` and
``ops.health`` to whatever needs to count or report::

    ops = Ops.from_settings(settings.http)
    ops.health.config_loaded()
    await ops.start()                      # serves /healthz, /readyz, /metrics when [http] enabled
    ...
    async with ops.tick(target.name, target.interval):
        ...                                # one scheduler tick of that target
    ...
    ops.health.shutting_down()             # on SIGTERM: not ready any more
    await ops.stop()
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from trace_scorer.config.http import HttpSettings
from trace_scorer.ops.health import Health, Probe
from trace_scorer.ops.server import OpsServer
from trace_scorer.ops.telemetry import Telemetry
from trace_scorer.runtime import progress

__all__ = ["Health", "Ops", "OpsServer", "Probe", "Telemetry"]


class Ops:
    """Telemetry + health + (when enabled) the HTTP server, wired together."""

    def __init__(self, telemetry: Telemetry, health: Health, server: OpsServer | None) -> None:
        self.telemetry = telemetry
        self.health = health
        self.server = server

    @classmethod
    def from_settings(cls, settings: HttpSettings, *, telemetry: Telemetry | None = None,
                      health: Health | None = None) -> Ops:
        telemetry = telemetry or Telemetry()
        health = health or Health(liveness_intervals=settings.liveness_intervals, liveness_min=settings.liveness_min)
        telemetry.export_health(health)
        server = OpsServer(health, telemetry, host=settings.host, port=settings.port) if settings.enabled else None
        return cls(telemetry, health, server)

    async def start(self) -> None:
        if self.server is not None:
            await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()

    @asynccontextmanager
    async def tick(self, target: str, interval: float) -> AsyncIterator[None]:
        """One tick of ``target``: reports it started (liveness) and times it (an exception = error tick).
        Within it, the signs of life of requests and retries (:mod:`trace_scorer.runtime.progress`) are the
        target's progress."""
        self.health.tick_started(target, interval)
        with self.telemetry.tick(target), progress.reported_to(functools.partial(self.health.progress, target)):
            yield

    def langfuse_request(self, endpoint: str, outcome: str, seconds: float | None) -> None:
        """One Langfuse attempt (``RequestStats.on_request``): counted; an answer clears "retrying"."""
        self.telemetry.langfuse_request(endpoint, outcome, seconds)
        if outcome.startswith("2"):
            self.health.langfuse_answered()

    def langfuse_retry(self, endpoint: str, outcome: str, wait: float) -> None:
        """A Langfuse retry (``RequestStats.on_retry``): counted, and not ready until answered again."""
        self.telemetry.langfuse_retry(endpoint, outcome, wait)
        self.health.langfuse_retrying(endpoint, outcome)

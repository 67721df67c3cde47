"""What both sources (production traces, dataset runs) hold: their target, the Langfuse client, the
state and the batch scorer."""

from __future__ import annotations

import asyncio
from datetime import datetime

from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.state import StateStore
from trace_scorer.worker.batch import BatchScorer
from trace_scorer.worker.tick import Tick, TickReport


class SourceBase:
    """What both sources hold: their target, the Langfuse client, the state and the batch scorer."""

    def __init__(
        self,
        target: TargetSettings,
        settings: Settings,
        client: LangfuseClient,
        state: StateStore,
        scorer: BatchScorer,
    ) -> None:
        self.target = target
        self.client = client
        self.state = state
        self.scorer = scorer
        self.batch_size = settings.worker.batch_size
        self.prepare(settings)

    def prepare(self, settings: Settings) -> None:
        """What a source derives from its target and the settings once, at construction (none here)."""

    def start_tick(self, now: datetime, stop: asyncio.Event, report: TickReport | None = None) -> Tick:
        """A tick's context, made once at its start: the time it goes by, its report (a fresh one counting
        the target's unit unless given: a backfill counts all of its windows into one), the stop signal,
        and the scorer's plan and telemetry."""
        report = report or TickReport(self.target.name, unit=self.target.scope)
        return Tick(now, report, stop, self.scorer.plan, self.scorer.telemetry)

    def present(self, local: datetime) -> datetime:
        """The time a tick goes by: the Langfuse server's own (its ``Date`` header) when the local clock
        ``local`` is off it, so a wall-clock step never moves a window past what the server holds."""
        return self.client.transport.server_time.present(local)

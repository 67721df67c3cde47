"""``[worker]`` and ``[state]``: how the long-running worker paces itself, and where it remembers."""

from __future__ import annotations

from pydantic import Field

from trace_scorer.config.common import Duration, StrictModel


class WorkerSettings(StrictModel):
    #: Traces scored at once (LLM judges have their own per-provider limits on top).
    concurrency: int = Field(default=16, ge=1, le=1024)
    #: Traces fetched, scored and posted together; bounds memory whatever the backlog.
    batch_size: int = Field(default=200, ge=1, le=10_000)
    #: On SIGTERM/SIGINT the batch in hand is finished within this time, then the worker exits.
    shutdown_grace: Duration = 30.0


class StateSettings(StrictModel):
    #: The SQLite file with watermarks and the scoring ledger (put it on a persistent volume).
    path: str = "trace-scorer.db"

"""``[worker]``: how the long-running worker paces itself (``[state]``, where it remembers: config/state.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trace_scorer.config.common import Duration, StrictModel
from trace_scorer.config.state import StateSettings

__all__ = ["EventLoop", "StateSettings", "WorkerSettings"]  # StateSettings: where callers imported it from before

#: ``auto``: uvloop when it is installed, else asyncio's loop; ``uvloop``: uvloop or a start-up error;
#: ``asyncio``: the standard library's loop (trace_scorer/worker/event_loop.py).
EventLoop = Literal["auto", "uvloop", "asyncio"]


class WorkerSettings(StrictModel):
    #: Traces scored at once (LLM judges have their own per-provider limits on top).
    concurrency: int = Field(default=16, ge=1, le=1024)
    #: Traces fetched, scored and posted together; bounds memory whatever the backlog.
    batch_size: int = Field(default=200, ge=1, le=10_000)
    #: On SIGTERM/SIGINT the batch in hand is finished within this time, then the worker exits.
    shutdown_grace: Duration = 30.0
    #: Distributed mode (a PostgreSQL state): jobs (batches, plans) this replica runs at once; each batch
    #: scores ``concurrency`` traces at once.
    jobs: int = Field(default=2, ge=1, le=64)
    #: Distributed mode: a replica silent (no heartbeat) this long is taken for dead and its jobs go back to
    #: the queue. Heartbeats are sent every third of it.
    stalled_after: Duration = Field(default=30.0, ge=3.0)
    #: The event loop of ``run``, ``backfill`` and ``check``: uvloop (``auto``, where it is installed) costs
    #: less CPU a trace than asyncio's own loop.
    event_loop: EventLoop = "auto"

"""``trace-scorer run`` on a PostgreSQL state: this process is one replica of a fleet sharing the work.

The queue is procrastinate's (a PostgreSQL job queue: periodic jobs deferred once whatever the number of
workers, locks, retries, stalled-job recovery, graceful shutdown), in the state's database. Jobs:

- ``plan`` (per target, at its interval; procrastinate defers each periodic run once for the whole
  fleet, and the target's lock lets one run at a time). Production traces: the target's next window is
  read and cut into batches, recorded with how far the watermark may move (``WindowBook``), one
  ``score_batch`` job each. Dataset runs: the target's tick, so a run is worked on by one replica at a
  time.
- ``score_batch``: any replica fetches, scores, posts and records one batch (the ledger drops what an
  interrupted earlier attempt had done). A failure (Langfuse unavailable) is retried by the queue with
  back-off; the batch that settles last moves the watermark and plans the next window at once.
- ``recover_stalled``: jobs of a replica that stopped sending heartbeats (``kill -9``, a lost node) go
  back to the queue.

SIGTERM: no new jobs; the batches in hand finish within ``worker.shutdown_grace`` (or go back to the
queue), and the rest stay queued for the other replicas.

A database outage (restart, fail-over, a frozen server) is ridden out: procrastinate stops its worker when
one of its loops loses the database, and the replica starts it again with capped exponential back-off
(:data:`RESTART_BACKOFF`), not ready meanwhile (``/readyz`` says why); a job the outage failed is retried
by the queue; a state call waits :data:`~trace_scorer.state.postgres.CALL_DEADLINE` seconds at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import structlog
from procrastinate import App, PsycopgConnector, exceptions
from procrastinate.jobs import Job, Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision
from procrastinate.schema import SchemaManager
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from trace_scorer.config.settings import Settings
from trace_scorer.distributed.rates import SharedRates
from trace_scorer.distributed.windows import OpenWindow, PlannedBatch, WindowBook
from trace_scorer.langfuse import (
    LangfuseAuthError,
    LangfuseClient,
    LangfuseContractError,
    LangfuseError,
    trace_root_from_row,
)
from trace_scorer.langfuse.http.clock import CLOCK_TOLERANCE_SECONDS
from trace_scorer.ops import Ops
from trace_scorer.state import StateError, open_state
from trace_scorer.state.postgres import CALL_DEADLINE, connection_defaults
from trace_scorer.worker.batch import LangfuseUnavailable
from trace_scorer.worker.schedule import ClockWatch
from trace_scorer.worker.service import (
    Context,
    open_context,
    reference_metadata_keys,
    report_langfuse_trouble,
    tune_garbage_collector,
    utc_now,
)
from trace_scorer.worker.tick import TickReport
from trace_scorer.worker.traces import TraceSource, chunks

log = structlog.get_logger(__name__)

PLAN = "trace_scorer.scoring.plan"
SCORE_BATCH = "trace_scorer.score_batch"
RECOVER_STALLED = "trace_scorer.recover_stalled"
#: How often the queue is looked at for jobs of replicas that died, and the fleet's gauges refreshed.
HOUSEKEEPING_CRON = "* * * * * */10"

#: Seconds before procrastinate's worker is started again after it stopped on its own (a database
#: outage): doubling from the first, capped at the second; back to the first after a minute of work.
RESTART_BACKOFF = (1.0, 60.0)
#: Seconds a connection of the pool is waited for (psycopg_pool's default is 30).
POOL_TIMEOUT = 10.0

#: The advisory lock under which the queue's schema is created ("trsq").
QUEUE_SCHEMA_LOCK = 0x74727371
_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)


def cron_every(seconds: float) -> str:
    """A cron for "every ``seconds``", rounded down to a step cron can express (a divisor of a minute,
    or of an hour in minutes); procrastinate's sixth field is seconds."""
    whole = max(1, int(seconds))
    if whole < 60:
        return f"* * * * * */{max(s for s in _STEPS if s <= whole)}"
    minutes = whole // 60
    if minutes >= 60:
        return "0 * * * *"
    step = max(s for s in _STEPS if s <= minutes)
    return "* * * * *" if step == 1 else f"*/{step} * * * *"


class JobRetry(BaseRetryStrategy):
    """Retry what may pass (Langfuse or the database unavailable, a shutdown) with capped exponential
    back-off — never sooner than a ``Retry-After`` the client gave up on —, for as long as it takes: a
    batch holds its window's watermark, as an incomplete tick holds it in one process. What cannot pass by
    waiting (the server refuses the request's shape, credentials refused) is not retried: the target
    stops, and ``/readyz`` says why."""

    def __init__(self, *, initial: float = 2.0, maximum: float = 300.0) -> None:
        self.initial = initial
        self.maximum = maximum

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, LangfuseContractError | LangfuseAuthError):
            return None
        wait = min(self.maximum, self.initial * 2 ** min(job.attempts, 16))
        asked = getattr(exception, "retry_after", None)  # Langfuse's Retry-After, longer than the client waits
        if isinstance(asked, int | float):
            wait = max(wait, float(asked))
        return RetryDecision(retry_in={"seconds": math.ceil(wait)})


@dataclass
class _JobRun:
    report: TickReport


def batch_lock(target: str, window_id: str, batch_no: int) -> str:
    return f"batch:{target}:{window_id}:{batch_no}"


def plan_lock(target: str) -> str:
    """The lock and queueing lock of a target's plan: one waiting and one running at a time, fleet-wide."""
    return f"plan:{target}"


class Fleet:
    """The jobs of one replica, on the fleet's queue."""

    def __init__(
        self,
        context: Context,
        app: App,
        book: WindowBook,
        pool: AsyncConnectionPool,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.context = context
        self.app = app
        self.book = book
        self.pool = pool
        self.clock = clock
        #: Steps of this replica's wall clock, looked for at every job (logged and counted).
        self.clock_watch = ClockWatch(context.ops.telemetry, clock)
        #: Targets stopped for good on this replica (a request the server refuses as a whole).
        self.stopped: dict[str, str] = {}
        #: procrastinate's worker is running (False while it is started again after an outage).
        self.worker_running = True
        retry = JobRetry()
        self.plan_task = app.task(name=PLAN, retry=retry)(self.plan)
        self.batch_task = app.task(name=SCORE_BATCH, retry=retry)(self.score_batch)
        self.recover_task = app.task(name=RECOVER_STALLED, queueing_lock=RECOVER_STALLED)(self.housekeeping)
        for target in context.settings.targets:
            app.periodic(
                cron=cron_every(target.interval),
                periodic_id=target.name,
                task_kwargs={"target": target.name},
                lock=plan_lock(target.name),
                queueing_lock=plan_lock(target.name),
            )(self.plan_task)
        app.periodic(cron=HOUSEKEEPING_CRON, periodic_id="housekeeping")(self.recover_task)

    # -- plan ------------------------------------------------------------------------------------------

    async def plan(self, timestamp: int = 0, *, target: str) -> None:
        """Plan the target's next window (traces) or run its tick (dataset runs). ``timestamp``: when the
        queue deferred a periodic run (0 when a settled window asked for the next one at once)."""
        if target in self.stopped or target not in self.context.sources:
            return
        source = self.context.sources[target]
        async with self._job(target, "plan") as job:
            if isinstance(source, TraceSource):
                await self._plan_window(source, job.report)
            else:
                job.report = await source.tick(self.clock(), asyncio.Event())

    async def _plan_window(self, source: TraceSource, report: TickReport) -> None:
        name = source.target.name
        source.scorer.record_unrecorded()  # what this replica posted but could not record, first
        now = source.present(self.clock())
        window = await self.book.open_window(name)
        if window is not None and window.complete:
            await self._finish(source, window.window_id, window.hold)
        elif window is not None:
            report.window = f"window {window.window_id} open: {len(window.unsettled)} batches left"
            await self._defer_missing(name, window)
            return
        batches = [
            PlannedBatch([r.row for r in c], retry=True) for c in chunks(source.due_retries(now), source.batch_size)
        ]
        start = self.context.state.watermark(name) or now
        hold = start
        found = source.next_window(now, report)
        if found is not None:
            tick = source.start_tick(now, asyncio.Event(), report)
            plan = await source.plan_window(found, tick, reread=source.reread())
            batches += [PlannedBatch([r.row for r in c]) for c in chunks(plan.todo, source.batch_size)]
            start, hold = found.start, plan.hold
        if not batches:
            if hold > start:
                self.context.state.set_watermark(name, hold)
            return
        window_id = f"{start.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        if await self.book.plan(name, window_id, start, hold, batches):
            await self._defer_batches(name, window_id, range(len(batches)))
            report.window += f" → {len(batches)} batches"

    async def _defer_batches(self, target: str, window_id: str, numbers: Sequence[int]) -> None:
        for number in numbers:
            lock = batch_lock(target, window_id, number)
            with contextlib.suppress(exceptions.AlreadyEnqueued):
                await self.batch_task.configure(lock=lock, queueing_lock=lock).defer_async(
                    target=target, window_id=window_id, batch_no=number
                )

    async def _defer_missing(self, target: str, window: OpenWindow) -> None:
        """Defer again the unsettled batches that have no job waiting or running (a planner that died
        while deferring); a job of a dead replica is "doing" until it is recovered, so not deferred twice."""
        locks = {batch_lock(target, window.window_id, n): n for n in window.unsettled}
        async with self.pool.connection() as db:
            rows = await (
                await db.execute(
                    "SELECT lock FROM procrastinate_jobs WHERE lock = ANY(%s) AND status IN ('todo', 'doing')",
                    (list(locks),),
                )
            ).fetchall()
        live = {r[0] for r in rows}
        missing = [n for lock, n in locks.items() if lock not in live]
        if missing:
            log.warning("batches_deferred_again", target=target, window=window.window_id, batches=missing)
            await self._defer_batches(target, window.window_id, missing)

    async def _finish(self, source: TraceSource, window_id: str, hold: datetime) -> None:
        """Every batch settled: move the watermark to the window's hold, forget the window. A watermark
        ahead of the clock (stored by a wrong clock: ``TraceSource.next_window``) is moved back."""
        name = source.target.name
        current = self.context.state.watermark(name)
        latest = source.present(self.clock()) + timedelta(seconds=CLOCK_TOLERANCE_SECONDS)
        ahead = current is not None and current > latest
        if current is None or hold > current or ahead:
            self.context.state.set_watermark(name, hold)
        await self.book.remove(name, window_id)

    # -- batches ---------------------------------------------------------------------------------------

    async def score_batch(self, target: str, window_id: str, batch_no: int) -> None:
        """Score one planned batch; the last one of its window moves the watermark."""
        source = self.context.sources.get(target)
        if target in self.stopped or not isinstance(source, TraceSource):
            return
        found = await self.book.batch(target, window_id, batch_no)
        if found is None or found[1]:
            return  # the window was finished (or this batch settled) by an earlier attempt
        batch = found[0]
        async with self._job(target, "batch") as job:
            report = job.report
            report.window = f"window {window_id} batch {batch_no}"
            roots = [trace_root_from_row(row) for row in batch.rows]
            source.scorer.record_unrecorded()  # what this replica posted but could not record, first
            state, config_hash = self.context.state, source.scorer.plan.config_hash
            known = state.scored_hashes(target, [r.trace_id for r in roots])
            failed = set() if batch.retry else state.failed_subjects(target, [r.trace_id for r in roots])
            todo = [r for r in roots if known.get(r.trace_id) != config_hash and r.trace_id not in failed]
            if todo:
                await source.score_roots(todo, source.start_tick(source.present(self.clock()), asyncio.Event(), report))
            hold = await self.book.settle(target, window_id, batch_no)
            if hold is not None:  # the window's last batch: move the watermark, plan the next window now
                await self._finish(source, window_id, hold)
                with contextlib.suppress(exceptions.AlreadyEnqueued):
                    lock = plan_lock(target)
                    await self.plan_task.configure(lock=lock, queueing_lock=lock).defer_async(target=target)

    # -- the job's report, errors and health ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _job(self, target: str, kind: str) -> AsyncIterator[_JobRun]:
        """One job: logged as one event (as a tick is), Langfuse's state and stopped targets reported."""
        ops = self.context.ops
        client = self.context.client
        requests_before = client.stats.total_requests
        started = asyncio.get_running_loop().time()
        source = self.context.sources.get(target)
        job = _JobRun(TickReport(target, unit=source.target.scope if source is not None else "trace"))
        ok = False
        self.clock_watch.look()
        try:
            yield job
            ok = True
            ops.health.langfuse_ok()
        except (LangfuseUnavailable, LangfuseError) as exc:
            report_langfuse_trouble(ops.health, self.stopped, target, exc)
            raise  # the queue retries it (JobRetry), or not
        except (StateError, psycopg.Error) as exc:  # the database away: not ready; the queue retries the job
            ops.health.database_failed(f"{type(exc).__name__}: {exc}")
            log.warning("job_database_failed", target=target, job=kind, reason=f"{type(exc).__name__}: {exc}")
            raise
        finally:
            job.report.count_skipped(ops.telemetry)
            log.info(
                kind,
                target=target,
                ok=ok,
                **job.report.as_log(),
                langfuse_requests=client.stats.total_requests - requests_before,
                duration_seconds=round(asyncio.get_running_loop().time() - started, 3),
            )

    # -- housekeeping ----------------------------------------------------------------------------------

    async def housekeeping(self, timestamp: int = 0) -> None:
        """Jobs of replicas that stopped sending heartbeats go back to the queue."""
        manager = self.app.job_manager
        for job in await manager.get_stalled_jobs():
            try:
                await manager.retry_job(job)
                log.warning("stalled_job_retried", job=job.call_string)
            except exceptions.UniqueViolation:
                # The same job waits in the queue already (a plan deferred again while this one was stalled,
                # e.g. by a replica whose database went away): retried, this one would break the queueing
                # lock; left "doing", its lock would keep the waiting one from ever running. Ended instead.
                await manager.finish_job(job, status=Status.ABORTED, delete_job=False)
                log.warning("stalled_job_ended", job=job.call_string, reason="the same job is queued already")
            except exceptions.ProcrastinateException as exc:
                log.warning("stalled_job_not_retried", job=job.call_string, reason=str(exc))

    async def watch_queue(self, stop: asyncio.Event, every: float = 10.0) -> None:
        """Liveness and the queue's gauges: the database answers, the queue's jobs by target and state.
        A check gets ``every`` seconds to answer (a frozen server never does)."""
        health, telemetry = self.context.ops.health, self.context.ops.telemetry
        while not stop.is_set():
            health.tick_started("queue", every)  # the loop is alive whether or not the database answers
            try:
                counts = {
                    (target.name, kind, state): 0
                    for target in self.context.settings.targets
                    for kind in _KINDS.values()
                    for state in ("todo", "doing", "failed")
                }  # every series present, 0 when idle: a dashboard shows an empty queue, not a gap
                async with asyncio.timeout(every):
                    counts.update(await queue_counts(self.pool))
                telemetry.queue_jobs(counts)
                if self.worker_running:
                    health.database_ok()
            except Exception as exc:  # reported, never fatal: readiness says the database is down
                reason = f"no answer within {every:g} s" if isinstance(exc, TimeoutError) else str(exc)
                health.database_failed(f"{type(exc).__name__}: {reason}")
                log.warning("database_check_failed", reason=f"{type(exc).__name__}: {reason}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)


_KINDS = {PLAN: "plan", SCORE_BATCH: "batch"}


async def queue_counts(pool: AsyncConnectionPool) -> dict[tuple[str, str, str], int]:
    """The fleet's queue: jobs by (target, kind, state)."""
    async with pool.connection() as db:
        rows = await (
            await db.execute(
                "SELECT args->>'target', task_name, status::text, count(*) FROM procrastinate_jobs "
                "WHERE task_name = ANY(%s) AND status IN ('todo', 'doing', 'failed') GROUP BY 1, 2, 3",
                (list(_KINDS),),
            )
        ).fetchall()
    return {(r[0] or "", _KINDS[r[1]], r[2]): int(r[3]) for r in rows}


async def start_replica(settings: Settings, stack: AsyncExitStack, ops: Ops, stop: asyncio.Event) -> Replica:
    """Open this replica (the ``start`` of ``run_worker`` when ``[state] url`` is set): the state (migrated),
    the connection pool with the fleet's budgets, the queue, then everything a worker holds."""
    url = settings.state.postgres_url
    if url is None:
        raise ValueError("distributed mode needs [state] url")
    # First the state: a schema newer than this release (or an unusable database) stops here, and the
    # fleet's tables exist before the shared budgets are used.
    state = open_state(settings.state, deadline=CALL_DEADLINE)
    stack.callback(state.close)
    pool = AsyncConnectionPool(
        url,
        min_size=2,
        max_size=settings.worker.jobs + 6,
        open=False,
        timeout=POOL_TIMEOUT,
        kwargs={
            "options": f"-c search_path={settings.state.db_schema}",
            **connection_defaults(conninfo_to_dict(url)),
        },
    )
    await pool.open(wait=True, timeout=30)
    stack.push_async_callback(pool.close)
    app = App(connector=PsycopgConnector())
    await app.open_async(pool)
    stack.push_async_callback(app.close_async)
    ensure_queue_schema(url, settings.state.db_schema)
    rates = SharedRates(pool)
    client = LangfuseClient(settings.langfuse, expand_metadata=reference_metadata_keys(settings))
    stack.push_async_callback(client.aclose)
    if settings.langfuse.requests_per_minute:
        client.transport.budget.share(rates.gate("langfuse", settings.langfuse.requests_per_minute, 60.0))
    context = await open_context(settings, stack, ops=ops, client=client, state=state)
    for resource in (context.resources.judge, context.resources.embedder):
        share = getattr(resource, "share_rates", None)
        if share is not None:
            share(lambda provider, rpm: rates.per_minute(f"provider:{provider}", rpm))
    ops.health.database_ok()
    return Replica(Fleet(context, app, WindowBook(pool), pool), stop)


def ensure_queue_schema(url: str, schema: str) -> bool:
    """procrastinate's tables, in the state's schema, created once: True when this call created them.
    Replicas starting together (and ``state migrate``) take an advisory lock, so only one creates them."""
    with psycopg.connect(url, options=f"-c search_path={schema}") as db:  # one transaction, committed at exit
        db.execute("SELECT pg_advisory_xact_lock(%s)", (QUEUE_SCHEMA_LOCK,))
        found = db.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        if found is not None and found[0] is not None:
            return False
        db.execute(SchemaManager.get_schema())
    log.info("queue_schema_created", schema=schema)
    return True


@dataclass
class Replica:
    """A started replica: runs its share of the fleet's jobs until ``stop``."""

    fleet: Fleet
    stop: asyncio.Event
    #: Seconds between the queue's checks (readiness, gauges).
    check_every: float = 10.0
    #: (first, longest) wait before procrastinate's worker is started again after it stopped on its own.
    restart_backoff: tuple[float, float] = RESTART_BACKOFF

    async def run(self) -> None:
        """Work until ``stop``; then finish the jobs in hand within the grace time (or hand them back)."""
        settings = self.fleet.context.settings
        watcher = asyncio.ensure_future(self.fleet.watch_queue(self.stop, self.check_every))
        tune_garbage_collector()
        log.info("worker_started", mode="distributed", targets=[t.name for t in settings.targets])
        try:
            await self._work()
        finally:
            self.fleet.context.ops.health.shutting_down()
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _work(self) -> None:
        """procrastinate's worker until ``stop``, started again whenever it stops on its own: it does when
        one of its loops loses the database (a restart, a fail-over), and a replica must ride that out
        rather than exit (every replica of a fleet would exit at once)."""
        settings = self.fleet.context.settings
        loop = asyncio.get_running_loop()
        failures = 0
        while not self.stop.is_set():
            started = loop.time()
            worker = asyncio.ensure_future(
                self.fleet.app.run_worker_async(
                    concurrency=settings.worker.jobs,
                    install_signal_handlers=False,
                    shutdown_graceful_timeout=settings.worker.shutdown_grace,
                    stalled_worker_timeout=settings.worker.stalled_after,
                    update_heartbeat_interval=max(1.0, settings.worker.stalled_after / 3),
                )
            )
            stopped = asyncio.ensure_future(self.stop.wait())
            try:
                await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (worker, stopped):
                    task.cancel()  # procrastinate: no new jobs; the running ones finish within the grace time
                error = await _outcome(worker)
                await _outcome(stopped)
            if self.stop.is_set():
                return
            failures = 1 if loop.time() - started > 60 else failures + 1
            first, longest = self.restart_backoff
            wait = min(longest, first * 2 ** (failures - 1))
            why = _describe(error)
            self.fleet.worker_running = False
            health = self.fleet.context.ops.health
            health.database_failed(f"the queue's worker stopped ({why}); started again in {wait:g} s")
            log.warning("queue_worker_stopped", reason=why, restart_in=wait)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), wait)
            self.fleet.worker_running = True


def _describe(error: BaseException | None) -> str:
    """An error in one line, with its cause: procrastinate wraps the driver's errors in a multi-line
    ``ConnectorException("Database error.")``, whose cause says what happened (``PoolTimeout: …``)."""
    if error is None:
        return "no error"
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    cause = error.__cause__
    return text if cause is None else f"{text} ({type(cause).__name__}: {' '.join(str(cause).split())})"


async def _outcome(task: asyncio.Future[Any]) -> BaseException | None:
    """Wait for a finished or cancelled task and retrieve its exception (so asyncio never reports it as
    "never retrieved"): the exception it ended with, None when it returned or was cancelled."""
    try:
        await task
    except asyncio.CancelledError:
        return None
    except Exception as exc:
        return exc
    return None

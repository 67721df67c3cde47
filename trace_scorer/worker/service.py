"""``trace-scorer run``: start-up, one scheduled job per target, and a clean shutdown.

Start-up connects to Langfuse (health, project, API generation), creates the missing score configs,
builds the judge and every target's plan — any configuration problem stops it here, before any work.
Then each target ticks at its interval on the monotonic clock (:mod:`.schedule`), never two ticks of one
target at once. SIGTERM/SIGINT: no new ticks; running ticks finish the batch in hand (its scores posted, state
saved) within ``worker.shutdown_grace``; exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
import time
from collections.abc import Awaitable, Callable, Collection
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import structlog

from trace_scorer.config.references import parse_path
from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse import (
    ConnectionInfo,
    LangfuseAuthError,
    LangfuseClient,
    LangfuseContractError,
    LangfuseError,
)
from trace_scorer.langfuse.server.evaluators import evaluator_names, load_evaluators, read_evaluator_paths
from trace_scorer.ops import Ops
from trace_scorer.ops.health import Health
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import TargetPlan, build_plans
from trace_scorer.scoring.resources import OpenResources, open_resources
from trace_scorer.state import StateError, StateStore, open_state
from trace_scorer.worker.batch import BatchScorer, LangfuseUnavailable
from trace_scorer.worker.dataset_runs import DatasetRunSource
from trace_scorer.worker.observations import ObservationSource
from trace_scorer.worker.schedule import ClockWatch, Wait, every, wait_or_stop
from trace_scorer.worker.scores import config_specs
from trace_scorer.worker.sessions import SessionSource
from trace_scorer.worker.tick import TickReport
from trace_scorer.worker.traces import TraceSource

log = structlog.get_logger(__name__)

T = TypeVar("T")


class Source(Protocol):
    target: TargetSettings

    async def tick(self, now: datetime, stop: asyncio.Event) -> TickReport: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


def reference_metadata_keys(settings: Settings) -> list[str]:
    """Root-metadata keys the targets' references read (``$.trace.metadata.KEY…``), nested and flattened
    (``$.trace.metadata.a.b`` → ``a`` and ``a.b``: Langfuse v4 stores nested metadata under dotted keys).
    Passed as ``expandMetadata`` so a server that cuts metadata values at 200 characters returns these
    whole; unknown keys are harmless to the server."""
    keys: dict[str, None] = {}
    for target in settings.targets:
        for paths in target.references.model_dump().values():
            for path in paths:
                steps = parse_path(path)
                if steps[:2] != ("trace", "metadata"):
                    continue
                names = [s for s in steps[2:] if isinstance(s, str)]
                for end in range(1, len(names) + 1):
                    key = ".".join(names[:end])
                    if "," not in key:  # the parameter is a comma-separated list
                        keys[key] = None
    return list(keys)


@dataclass
class Context:
    """Everything a running worker holds, built once by :func:`open_context`."""

    settings: Settings
    client: LangfuseClient
    state: StateStore
    ops: Ops
    info: ConnectionInfo
    plans: dict[str, TargetPlan]
    sources: dict[str, Source]
    #: The judge and the embedder (None where not configured).
    resources: OpenResources


async def open_context(
    settings: Settings,
    stack: AsyncExitStack,
    *,
    ops: Ops,
    client: LangfuseClient | None = None,
    state: StateStore | None = None,
    tracing_default: bool = True,
) -> Context:
    """Connect, build plans and sources. Raises ConfigError / LangfuseAuthError for what the user must fix."""
    # First: a second worker on this state (or a state it cannot use) stops here, before any request.
    if state is None:
        state = open_state(settings.state)
        stack.callback(state.close)
    resources = open_resources(settings, stack, tracing_default=tracing_default)
    judge = resources.judge
    if judge is not None:
        judge.on_call = lambda model, outcome, usage, seconds: ops.telemetry.judge_call(
            model,
            outcome,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost,
            duration_seconds=seconds,
        )
        judge.on_retry = lambda model, status, wait: ops.telemetry.judge_retry(model, status, wait)
    embedder = resources.embedder
    if embedder is not None and hasattr(embedder, "on_retry"):  # remote providers (local models do not retry)
        embedder.on_retry = lambda model, status, wait: ops.telemetry.judge_retry(model, status, wait)
    plans = {plan.target.name: plan for plan in build_plans(settings.targets, resources=resources)}

    if client is None:
        client = LangfuseClient(settings.langfuse, expand_metadata=reference_metadata_keys(settings))
        stack.push_async_callback(client.aclose)
    client.stats.on_request = ops.langfuse_request
    client.stats.on_retry = ops.langfuse_retry
    info = await client.connect()
    ops.health.langfuse_ok(
        detail=f"{info.base_url} {info.generation} server {info.server_version or 'unknown'}, "
        f"scores via {info.score_posting}"
    )
    log.info(
        "langfuse_connected",
        base_url=info.base_url,
        server_version=info.server_version,
        api_generation=str(info.generation),
        generation_source=info.generation_source,
        score_posting=str(info.score_posting),
        project=info.project_name,
    )
    if judge is not None and settings.judge.tracing is not False and not client.capabilities.otlp:
        log.warning(
            "judge_tracing_unsupported",
            server_version=info.server_version,
            reason="this Langfuse has no OTLP endpoint: judge calls cannot be recorded (set judge.tracing = false)",
        )
    evaluators = evaluator_names(settings.targets)
    if evaluators:  # Langfuse's evaluators by name: read now, and the plans built again to check them
        resources.evaluators = await load_evaluators(client.transport, client.capabilities, evaluators)
        read_evaluator_paths(settings.targets, resources.evaluators)
        plans = {plan.target.name: plan for plan in build_plans(settings.targets, resources=resources)}
    specs = {spec.name: spec for plan in plans.values() for spec in config_specs(plan)}
    await client.ensure_score_configs(list(specs.values()))

    sources: dict[str, Source] = {}
    for target in settings.targets:
        plan = plans[target.name]
        scorer = BatchScorer(
            target,
            plan,
            Pipeline(plan),
            client,
            state,
            ops.telemetry,
            concurrency=settings.worker.concurrency,
            progress=functools.partial(ops.health.progress, target.name),
        )
        source_class = TraceSource if target.source == "traces" else DatasetRunSource
        if target.scope == "session":
            source_class = SessionSource
        elif target.scope == "observation":
            source_class = ObservationSource
        sources[target.name] = source_class(target, settings, client, state, scorer)
    ops.health.config_loaded()
    return Context(settings, client, state, ops, info, plans, sources, resources)


def report_langfuse_trouble(
    health: Health, stopped: dict[str, str], target: str, exc: LangfuseUnavailable | LangfuseError
) -> None:
    """What a tick (or a fleet's job) that Langfuse failed tells ``/readyz`` and the log. A request the
    server refuses as a whole stops the target for good (``stopped``): retrying cannot help and nothing
    was settled."""
    if isinstance(exc, LangfuseContractError):
        stopped[target] = str(exc)
        health.target_stopped(target, str(exc))
        log.error("target_stopped", target=target, reason=str(exc))
        return
    health.langfuse_failed(str(exc))
    if isinstance(exc, LangfuseUnavailable):
        log.warning("tick_incomplete", target=target, reason=str(exc))
    elif isinstance(exc, LangfuseAuthError):
        log.error("langfuse_auth_failed", target=target, reason=str(exc))
    else:
        log.warning("tick_failed", target=target, reason=str(exc))


#: The cyclic garbage collector's thresholds once start-up is over (CPython's defaults: 700, 10, 10). What
#: the worker allocates is freed by reference counting or lives as long as a batch, which the defaults
#: walked again and again: 0.40-0.45 s of CPU a 1,000-trace bench run, 0.16-0.20 s with these. Safe for
#: memory only because nothing large is left in reference cycles (judge requests' retry controllers:
#: ``retry.run_retrying``; Langfuse's pages: ``langfuse/http/transport.py``): a 100,000-trace backlog peaks
#: at 243 MB with them, 242 MB without; before those fixes it rose to 314 MB (bench/README.md). Generation 0
#: at 50,000 rather than 5,000: its walks were still ~6 % of a deterministic target's CPU (bench_deterministic,
#: 4 pairs: 1.83 against 1.95 ms a trace; 20,000 gained nothing measurable), the judged run no different
#: (10.3 against 10.6 ms), the peak memory no higher and flat (a 10,000-trace backlog: 194 against 196 MB;
#: 100,000: 200 MB; figures of a slower VM than those above).
SERVING_GC_THRESHOLDS = (50000, 20, 100)


def tune_garbage_collector() -> None:
    """Set the cyclic garbage collector up for serving, once start-up is done.

    First take what start-up built (modules, classes, plans, clients: it lives as long as the process) out
    of its walks: ``gc.freeze``, the standard library's tool for long-lived processes, after a collection
    so no garbage is kept for good (without it every full collection walked ~240,000 objects again). Then
    collect less often (:data:`SERVING_GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*SERVING_GC_THRESHOLDS)


class Worker:
    """Runs the sources on their schedules until told to stop.

    ``clock`` is the wall clock, ``monotonic`` and ``wait`` the clock the ticks are scheduled on and the
    wait between them (tests inject their own: time moves without sleeping)."""

    def __init__(
        self,
        context: Context,
        clock: Callable[[], datetime] | None = None,
        stop: asyncio.Event | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wait: Wait = wait_or_stop,
    ) -> None:
        self.context = context
        #: :func:`utc_now` looked up now, not when the class was defined: the clock-step end-to-end test's
        #: hook (``standins/stepped_clock.py``) replaces it in a worker process.
        self.clock = clock or utc_now
        self.stop = stop or asyncio.Event()
        self.monotonic = monotonic
        self.wait = wait
        self.clock_watch = ClockWatch(context.ops.telemetry, self.clock, monotonic)
        self._running: set[asyncio.Task[None]] = set()
        #: Targets stopped for good (a request the server refuses as a whole), with the reason.
        self.stopped: dict[str, str] = {}
        #: Targets whose last tick the state refused to record (not ready until each records again).
        self._state_failed: set[str] = set()

    async def tick(self, source: Source) -> None:
        """One tick of one target: logged as one event, never raising into the scheduler."""
        target = source.target
        if target.name in self.stopped:
            return
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        client = self.context.client
        requests_before, retries_before = client.stats.total_requests, client.stats.total_retries
        started = asyncio.get_running_loop().time()
        ok = True
        report = TickReport(target.name)
        self.clock_watch.look()
        try:
            async with self.context.ops.tick(target.name, target.interval):
                report = await source.tick(self.clock(), self.stop)
            self.context.ops.health.langfuse_ok()
            if target.name in self._state_failed:
                self._state_failed.discard(target.name)
                if not self._state_failed:
                    self.context.ops.health.database_ok("state writable")
        except (LangfuseUnavailable, LangfuseError) as exc:
            ok = False
            report_langfuse_trouble(self.context.ops.health, self.stopped, target.name, exc)
        except StateError as exc:
            # Disk full, file made read-only: what was posted waits in memory (BatchScorer), nothing new is
            # posted for the target, and every tick tries the write again. Not ready meanwhile.
            ok = False
            self._state_failed.add(target.name)
            self.context.ops.health.database_failed(str(exc))
            log.error("state_write_failed", target=target.name, reason=str(exc))
        except Exception:
            ok = False
            log.exception("tick_error", target=target.name)
        finally:
            if task is not None:
                self._running.discard(task)
        report.count_skipped(self.context.ops.telemetry)
        log.info(
            "tick",
            target=target.name,
            ok=ok,
            **report.as_log(),
            langfuse_requests=client.stats.total_requests - requests_before,
            langfuse_retries=client.stats.total_retries - retries_before,
            duration_seconds=round(asyncio.get_running_loop().time() - started, 3),
        )
        if (judge := self.context.resources.judge) is not None and (spent := judge.ledger.by_model()):
            # the judges' running totals per model since start-up (docs/judges.md "Tokens, cost, cache")
            log.info("judge_usage", target=target.name, models={m: u.as_details() for m, u in spent.items()})

    async def run(self) -> None:
        """Tick every target at its interval until :attr:`stop` is set, then let running ticks finish."""
        loops = []
        for name, source in self.context.sources.items():
            self.context.ops.health.watch(name, source.target.interval)
            loops.append(
                asyncio.create_task(
                    every(
                        source.target.interval,
                        functools.partial(self.tick, source),
                        self.stop,
                        monotonic=self.monotonic,
                        wait=self.wait,
                    ),
                    name=f"ticks:{name}",
                )
            )
        tune_garbage_collector()
        running_on = type(asyncio.get_running_loop()).__module__.partition(".")[0]  # "uvloop" or "asyncio"
        log.info("worker_started", targets=list(self.context.sources), event_loop=running_on)
        try:
            await self.stop.wait()
        finally:
            # No new ticks (each loop sees stop), but the running ones finish the batch in hand.
            self.context.ops.health.shutting_down()
            await self.drain()
            for loop in loops:
                loop.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def drain(self) -> None:
        """Wait for running ticks to finish the batch in hand (they see :attr:`stop`), up to the grace time."""
        running = [t for t in self._running if not t.done()]
        if not running:
            return
        grace = self.context.settings.worker.shutdown_grace
        log.info("worker_stopping", running_ticks=len(running), grace_seconds=grace)
        await finish_within(running, grace)


async def finish_within(running: Collection[asyncio.Task[Any]], grace: float) -> None:
    """Let ``running`` (work told to stop) finish for up to ``grace`` seconds, then cancel what is left.

    Cancelling is safe for the scores: what was posted and answered is in the ledger already, what was not
    is scored again later with the same ids (an overwrite, never a duplicate). ``run`` and ``backfill``
    both stop this way."""
    _, pending = await asyncio.wait(running, timeout=grace)
    for task in pending:
        task.cancel()
    if pending:
        log.warning("worker_stop_timeout", cancelled_ticks=len(pending))
        await asyncio.wait(pending, timeout=1.0)  # unwound before the client and the state close


async def unless_stopped(opening: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``await opening``, or None as soon as ``stop`` is set: start-up is cancelled (nothing to save yet).

    Connecting retries an unreachable Langfuse for as long as ``[langfuse.retry]`` allows (a minute by
    default); SIGTERM must not wait for that, or the worker overruns its grace period and is killed.
    """
    task = asyncio.ensure_future(opening)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (stopped, task):
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
    return None if task.cancelled() else task.result()


class Running(Protocol):
    async def run(self) -> None: ...


#: Opens what a worker runs on (closed by the stack) and returns it, ready to run until ``stop``.
StartWorker = Callable[[Settings, AsyncExitStack, Ops, asyncio.Event], Awaitable[Running]]


async def start_single(settings: Settings, stack: AsyncExitStack, ops: Ops, stop: asyncio.Event) -> Running:
    """One process doing all the work on its own state (the SQLite default)."""
    return Worker(await open_context(settings, stack, ops=ops), stop=stop)


async def run_worker(settings: Settings, *, retry_start_every: float = 30.0, start: StartWorker = start_single) -> int:
    """The ``run`` command: returns the exit code. ``start``: the single worker, or a replica of a fleet
    (``trace_scorer.distributed``).

    Langfuse unreachable at start-up is waited for (not ready meanwhile, retried every
    ``retry_start_every`` seconds); wrong credentials or configuration raise at once (exit 2).
    """
    ops = Ops.from_settings(settings.http)
    await ops.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        while not stop.is_set():
            async with AsyncExitStack() as stack:
                try:
                    running = await unless_stopped(start(settings, stack, ops, stop), stop)
                    if running is None:
                        log.info("worker_stopped_during_start")
                        break
                except LangfuseAuthError:
                    raise
                except LangfuseError as exc:
                    ops.health.langfuse_failed(str(exc))
                    log.error("langfuse_unreachable_at_start", reason=str(exc), retry_in_seconds=retry_start_every)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), retry_start_every)
                    continue
                await running.run()
                break
        log.info("worker_stopped")
        return 0
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await ops.stop()

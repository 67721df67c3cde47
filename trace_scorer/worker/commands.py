"""``trace-scorer backfill`` (score a past window once) and ``trace-scorer check`` (what is configured and
reachable)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog
from rich.console import Console
from rich.table import Table

from trace_scorer.compare.analysis import Comparison
from trace_scorer.compare.worker import backfill_verdict, compare_backfilled
from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.errors import UserError
from trace_scorer.langfuse import (
    ConnectionInfo,
    LangfuseClient,
    LangfuseError,
    LangfuseNotFoundError,
    ScoreConfig,
    TimeWindow,
)
from trace_scorer.langfuse.errors import LangfuseUnusableError
from trace_scorer.langfuse.server.evaluators import evaluator_names, load_evaluators
from trace_scorer.metrics.base import Resources
from trace_scorer.onboarding.starter import read_samples
from trace_scorer.ops import Ops
from trace_scorer.sample import Sample
from trace_scorer.scoring.plan import AnyMetric, TargetPlan, build_plans
from trace_scorer.scoring.resources import OpenResources, open_resources
from trace_scorer.state import check_state
from trace_scorer.worker.backfill_bar import BackfillProgress
from trace_scorer.worker.dataset_runs import DatasetRunSource
from trace_scorer.worker.observations import observation_filter
from trace_scorer.worker.scores import config_specs
from trace_scorer.worker.service import Context, finish_within, open_context, unless_stopped, utc_now
from trace_scorer.worker.tick import TickReport
from trace_scorer.worker.traces import TraceSource, trace_filter

log = structlog.get_logger(__name__)


def windows(start: datetime, end: datetime, size: float) -> list[TimeWindow]:
    step = timedelta(seconds=size)
    result = []
    while start < end:
        result.append(TimeWindow(start, min(start + step, end)))
        start += step
    return result


async def run_backfill(settings: Settings, target_name: str, start: datetime, end: datetime | None) -> int:
    """Score ``[start, end)`` of one target once. The watermark is not touched; the ledger is (so a
    second backfill of the same window posts nothing new, and the worker skips what was done here).

    SIGTERM/SIGINT stop it as they stop ``run``: no new batch; the one in hand finishes within
    ``worker.shutdown_grace`` or is cancelled (what it posted is recorded; the rest is scored by a later
    run, with the same score ids); exit 0."""
    target = settings.target(target_name)
    now = utc_now()
    end = min(end or now, now)
    if start >= end:
        print(f"trace-scorer: nothing to do: --from {start.isoformat()} is not before {end.isoformat()}")
        return 0
    ops = Ops.from_settings(settings.http.model_copy(update={"enabled": False}))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    total = TickReport(target.name, unit=target.scope)
    comparisons: list[Comparison] = []
    async with AsyncExitStack() as stack:
        context = await unless_stopped(open_context(settings, stack, ops=ops), stop)
        if context is not None:
            work = asyncio.ensure_future(_backfill(context, target, start, end, now, total, stop))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not work.done():
                grace = settings.worker.shutdown_grace
                log.info("backfill_stopping", target=target.name, grace_seconds=grace)
                await finish_within([work], grace)
            if not work.cancelled():
                total, comparisons = work.result()
    print(
        f"backfill {target.name} {start.isoformat()} → {end.isoformat()}: {total.seen} seen, {total.scored} scored, "
        f"{total.deferred} not finished yet, {sum(total.skipped.values())} skipped, {total.failed} failed, "
        f"{total.scores_posted} scores posted, {total.scores_rejected} rejected"
        + (" (interrupted)" if stop.is_set() else "")
    )
    return backfill_verdict(target, comparisons, Console()) if target.compare_to else 0


async def _backfill(
    context: Context,
    target: TargetSettings,
    start: datetime,
    end: datetime,
    now: datetime,
    total: TickReport,
    stop: asyncio.Event,
) -> tuple[TickReport, list[Comparison]]:
    """The backfill's work: the windows of a traces target (counted into ``total`` as they go, so a
    cancelled backfill still reports them), or a dataset-runs target's runs since ``start`` (then their
    comparisons, when configured)."""
    source = context.sources[target.name]
    if isinstance(source, TraceSource):
        parts = windows(start, end, target.max_window)
        with BackfillProgress(total, end - start, Console(stderr=True)).shown() as progress:
            for window in parts:
                if stop.is_set():
                    break
                await source.score_window(window, source.start_tick(now, stop, total))
                progress.covered(window.end - window.start)
    elif isinstance(source, DatasetRunSource):
        report = await source.tick(now, stop, since=start)
        if target.compare_to and not stop.is_set():  # docs/compare.md: the runs just scored vs their baselines
            plan, datasets = context.plans[target.name], await source.datasets()
            client, state = context.client, context.state
            return report, await compare_backfilled(target, plan, client, state, datasets, start, source.selected)
        return report, []
    return total, []


async def target_problems(
    client: LangfuseClient, target: TargetSettings, settings: Settings, now: datetime
) -> list[str]:
    """What keeps ``target`` from working on this server: each read it needs is tried once (a minute of
    traces; each dataset, its recent runs and a run's items). Empty: every endpoint answered."""
    reads = client.reads
    problems: list[str] = []
    try:
        if target.source == "traces":
            window = TimeWindow(now - timedelta(minutes=1), now)
            async for _ in reads.list_trace_roots(window, trace_filter(target, settings)):
                break
            if target.scope == "session":  # a session's traces are listed by its id: the server takes that
                session = replace(trace_filter(target, settings), session_id="trace-scorer-check")
                async for _ in reads.list_trace_roots(window, session):
                    break
            return problems
        since = now - timedelta(seconds=target.effective_lookback)
        for name in target.datasets:
            try:
                dataset = await reads.get_dataset(name)
            except LangfuseNotFoundError:
                problems.append(f"dataset {name!r} not found")
                continue
            async for experiment in reads.list_experiments([dataset], since):
                async for _ in reads.list_experiment_items(experiment, since):
                    break
                break
        if not client.capabilities.run_scores:
            problems.append(
                f"Langfuse {client.capabilities.describe()} has no scores on dataset runs: run-level results "
                "are not posted (item scores are)"
            )
    except LangfuseError as error:
        problems.append(str(error))
    return problems


@dataclass
class LangfuseFindings:
    """What ``check`` learnt from Langfuse: the server, its score configs, each target's problems."""

    info: ConnectionInfo
    configs: dict[str, ScoreConfig]
    problems: dict[str, list[str]]


async def check_langfuse(settings: Settings) -> LangfuseFindings:
    """Connect and try each target's reads, failing fast (``LangfuseClient.failing_fast``): unlike ``run``,
    which waits for a Langfuse starting beside it, ``check`` answers in seconds. Raises a ``UserError``
    (exit 2, one line: the URL and what to do) when Langfuse cannot be used at all."""
    try:
        async with LangfuseClient.failing_fast(settings.langfuse) as client:
            info = await client.connect()
            names = evaluator_names(settings.targets)
            if names:  # a missing evaluator or an unmapped variable is a ConfigError naming the key
                evaluators = await load_evaluators(client.transport, client.capabilities, names)
                build_plans(settings.targets, resources=Resources(evaluators=evaluators))
            configs = {c.name: c for c in await client.score_configs.list()}
            now = utc_now()
            problems = {t.name: await target_problems(client, t, settings, now) for t in settings.targets}
    except UserError:
        raise  # wrong keys, a forced generation the server lacks: their messages say what to do
    except LangfuseError as error:
        raise LangfuseUnusableError.explain(error, settings.langfuse.base_url) from None
    return LangfuseFindings(info, configs, problems)


async def run_check(settings: Settings, console: Console) -> int:
    """Validate everything the worker would, connect, try each target's reads, and print what was found.
    Creates and posts nothing (the state's migration and a write are tried and rolled back). Exit 1 when
    the state cannot be used or a target cannot work on this server; 2 (a ``UserError``) when Langfuse
    cannot be used at all. Each step is a function of its own, run in turn (add a step the same way)."""
    state = check_state(settings.state)
    async with AsyncExitStack() as resources_stack:
        resources = open_resources(settings, resources_stack, tracing_default=False)
        plans = build_plans(settings.targets, resources=resources)
        models_ok = await print_model_probes(resources, console)
    langfuse = await check_langfuse(settings)
    info, existing, problems = langfuse.info, langfuse.configs, langfuse.problems
    console.print(
        f"[bold]Langfuse[/bold] {info.base_url}: server {info.server_version or 'unknown'}, "
        f"API {info.generation} ({info.generation_source}), scores posted via {info.score_posting}, "
        f"project {info.project_name} ({info.project_id})",
        highlight=False,
    )
    providers = ", ".join(f"{p.name} ({len(p.chat_models)} chat models)" for p in settings.providers) or "none"
    console.print(f"[bold]Judge providers[/bold]: {providers}", highlight=False)
    verdict = "" if state.ok else "[red]cannot be used[/red]: "
    console.print(f"[bold]State[/bold] {state.description}: {verdict}{state.detail}", highlight=False)
    table = Table(title="targets", title_justify="left")
    for column in ("target", "source", "score", "score config", "config hash"):
        table.add_column(column)
    for plan in plans:
        for spec in config_specs(plan):
            config = existing.get(spec.name)
            status = f"{config.data_type} {config.id}" if config else "missing (created by run)"
            table.add_row(plan.target.name, plan.target.source, spec.name, status, plan.config_hash)
    console.print(table)
    failing = False
    working: set[str] = set()  # the targets whose inputs are surveyed (the others cannot read at all)
    for target in settings.targets:
        blocking = [p for p in problems[target.name] if "not posted" not in p]
        failing = failing or bool(blocking)
        if not blocking:
            working.add(target.name)
        verdict = "[red]cannot work[/red]" if blocking else "[green]endpoints answer[/green]"
        console.print(f"target {target.name} ({target.source}): {verdict}", highlight=False)
        for problem in problems[target.name]:
            console.print(f"  - {problem}", highlight=False)
    await print_input_coverage(settings, [p for p in plans if p.target.name in working], console)
    return 1 if failing or not state.ok or not models_ok else 0


#: ``check`` reads up to this many traces of the last ``INPUT_SURVEY_HOURS`` per traces target (as ``init``).
INPUT_SURVEY_TRACES = 50
INPUT_SURVEY_HOURS = 24.0
#: How a warning names a sample field (others: the field's name, spaced).
FIELD_WORDS = {"expected": "expected answers", "response": "responses", "reference": "references"}


async def print_input_coverage(settings: Settings, plans: list[TargetPlan], console: Console) -> None:
    """Per traces target, how many recent samples (traces, sessions or observations: its scope) carry each
    per-sample metric's inputs, extracted as the worker extracts them; a warning when none does (the
    metric would be skipped on every sample). Warnings
    only: the exit code is unchanged. Dataset-runs targets are not read: their items carry the expected
    outputs, and a run is made on purpose for its metrics."""
    now = utc_now()
    window = TimeWindow(now - timedelta(hours=INPUT_SURVEY_HOURS), now)
    try:
        async with LangfuseClient.failing_fast(settings.langfuse) as client:
            await client.connect()
            for plan in plans:
                await _print_target_coverage(client, plan, settings, window, console)
    except LangfuseError as error:  # the reads were tried above: a failure now is transient, not a verdict
        console.print(f"inputs not surveyed: {error}", highlight=False)


async def _print_target_coverage(
    client: LangfuseClient, plan: TargetPlan, settings: Settings, window: TimeWindow, console: Console
) -> None:
    target = plan.target
    if target.source != "traces":
        console.print(f"target {target.name}: inputs not surveyed (dataset runs)", highlight=False)
        return
    filter_ = trace_filter(target, settings)
    observations = observation_filter(target).matches if target.scope == "observation" else None
    unit = f"{target.scope}s"  # what one sample is: a trace, a session, an observation
    samples = await read_samples(
        client,
        window,
        filter_,
        INPUT_SURVEY_TRACES,
        target.references,
        observations,
        sessions=target.scope == "session",
    )
    if not samples:
        hours = f"{INPUT_SURVEY_HOURS:g}"
        console.print(
            f"target {target.name}: no {unit[:-1]} in the last {hours} h, inputs not surveyed", highlight=False
        )
        return
    console.print(f"target {target.name}: inputs in its {len(samples)} most recent {unit}", highlight=False)
    for line in input_coverage(plan.sample_metrics, samples, unit):
        console.print(f"  {line}", highlight=False)


def input_coverage(metrics: Sequence[AnyMetric], samples: Sequence[Sample], unit: str = "traces") -> list[str]:
    """One line per metric: how many of ``samples`` carry all its inputs; when none does, a warning naming
    the inputs no sample carries ("0 of 50 recent traces carry reference tool calls: tool_call_accuracy
    would be skipped on all")."""
    lines = []
    for metric in metrics:
        missing = [metric.missing_inputs(sample) for sample in samples]
        carrying = sum(not m for m in missing)
        if carrying:
            lines.append(f"{metric.name}: {carrying} of {len(samples)} recent {unit} carry its inputs")
            continue
        absent = [name for name in metric.requires if all(name in m for m in missing)] or list(metric.requires)
        fields = " and ".join(FIELD_WORDS.get(name, name.replace("_", " ")) for name in absent)
        lines.append(
            f"[yellow]warning[/yellow]: 0 of {len(samples)} recent {unit} carry {fields}: "
            f"{metric.name} would be skipped on all"
        )
    return lines


async def print_model_probes(resources: OpenResources, console: Console) -> bool:
    """One tiny request to every judge and embedding model (judge/probe.py), printed; False when one
    cannot work."""
    from trace_scorer.judge.probe import probe_models

    results = await probe_models(resources.judge, resources.embedder)
    for result in results:
        if result.ok:
            mode = f", structured output {result.mode}" if result.mode else ""
            console.print(
                f"[bold]{result.kind} model[/bold] {result.model}: [green]answers[/green] in "
                f"{result.seconds or 0:.2f}s{mode} ({result.detail})",
                highlight=False,
            )
        else:
            console.print(
                f"[bold]{result.kind} model[/bold] {result.model}: [red]cannot work[/red]: {result.reason}",
                highlight=False,
            )
        for warning in result.warnings:
            console.print(f"  [yellow]warning[/yellow]: {warning}", highlight=False)
    return all(r.ok for r in results)

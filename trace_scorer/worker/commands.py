"""``trace-scorer backfill`` (score a past window once) and ``trace-scorer check`` (what is configured and
reachable)."""

from __future__ import annotations

import asyncio
import signal
from contextlib import AsyncExitStack
from datetime import datetime, timedelta

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from trace_scorer.compare.analysis import Comparison
from trace_scorer.compare.worker import backfill_verdict, compare_backfilled
from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.langfuse import LangfuseClient, LangfuseError, LangfuseNotFoundError, TimeWindow
from trace_scorer.metrics.base import Resources
from trace_scorer.ops import Ops
from trace_scorer.plan import build_plan
from trace_scorer.resources import open_resources
from trace_scorer.state import check_state
from trace_scorer.worker.dataset_runs import DatasetRunSource
from trace_scorer.worker.scores import config_specs
from trace_scorer.worker.service import open_context, utc_now
from trace_scorer.worker.tick import TickReport
from trace_scorer.worker.traces import TraceSource, trace_filter


def windows(start: datetime, end: datetime, size: float) -> list[TimeWindow]:
    step = timedelta(seconds=size)
    result = []
    while start < end:
        result.append(TimeWindow(start, min(start + step, end)))
        start += step
    return result


async def run_backfill(settings: Settings, target_name: str, start: datetime, end: datetime | None) -> int:
    """Score ``[start, end)`` of one target once. The watermark is not touched; the ledger is (so a
    second backfill of the same window posts nothing new, and the worker skips what was done here)."""
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
    total = TickReport(target.name)
    comparisons: list[Comparison] = []
    async with AsyncExitStack() as stack:
        context = await open_context(settings, stack, ops=ops)
        source = context.sources[target.name]
        if isinstance(source, TraceSource):
            parts = windows(start, end, target.max_window)
            with Progress(
                TextColumn("backfill"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            ) as progress:
                task = progress.add_task("windows", total=len(parts))
                for window in parts:
                    if stop.is_set():
                        break
                    await source.score_window(window, now, total, stop)
                    progress.advance(task)
        elif isinstance(source, DatasetRunSource):
            total = await source.tick(now, stop, since=start)
            if target.compare_to and not stop.is_set():  # docs/compare.md: the runs just scored vs their baselines
                plan, datasets = context.plans[target.name], await source.datasets()
                comparisons = await compare_backfilled(
                    target, plan, context.client, context.state, datasets, start, source.selected
                )
    print(
        f"backfill {target.name} {start.isoformat()} → {end.isoformat()}: {total.seen} seen, {total.scored} scored, "
        f"{total.deferred} not finished yet, {sum(total.skipped.values())} skipped, {total.failed} failed, "
        f"{total.scores_posted} scores posted, {total.scores_rejected} rejected"
        + (" (interrupted)" if stop.is_set() else "")
    )
    return backfill_verdict(target, comparisons, Console()) if target.compare_to else 0


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


async def run_check(settings: Settings, console: Console) -> int:
    """Validate everything the worker would, connect, try each target's reads, and print what was found.
    Creates and posts nothing (the state's migration and a write are tried and rolled back). Exit 1 when
    the state cannot be used or a target cannot work on this server."""
    state = check_state(settings.state)
    async with AsyncExitStack() as resources_stack:
        resources = open_resources(settings, resources_stack, tracing_default=False)
        plans = [build_plan(t, index=i, resources=resources) for i, t in enumerate(settings.targets)]
        models_ok = await print_model_probes(resources, console)
    async with LangfuseClient(settings.langfuse) as client:
        info = await client.connect()
        existing = {c.name: c for c in await client.score_configs.list()}
        now = utc_now()
        problems = {t.name: await target_problems(client, t, settings, now) for t in settings.targets}
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
    for target in settings.targets:
        blocking = [p for p in problems[target.name] if "not posted" not in p]
        failing = failing or bool(blocking)
        verdict = "[red]cannot work[/red]" if blocking else "[green]endpoints answer[/green]"
        console.print(f"target {target.name} ({target.source}): {verdict}", highlight=False)
        for problem in problems[target.name]:
            console.print(f"  - {problem}", highlight=False)
    return 1 if failing or not state.ok or not models_ok else 0


async def print_model_probes(resources: Resources, console: Console) -> bool:
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

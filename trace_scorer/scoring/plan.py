"""Turn a target's configuration into a validated, ordered plan of metrics and KPIs.

Everything that can be wrong with a target is found here, once, at start-up: an unknown metric, bad
options, a duplicate or invalid score name, a read or formula naming something the target does not
compute, a dependency cycle. Each error names the key (``targets[0].metrics[1].mode``) and the reason.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

from pydantic import ValidationError

from trace_scorer.config.common import ConfigError, check_score_name, did_you_mean
from trace_scorer.config.settings import format_location
from trace_scorer.config.targets import TargetSettings
from trace_scorer.kpi.base import Kpi
from trace_scorer.kpi.expression import ExpressionError
from trace_scorer.kpi.formulas import build_kpi
from trace_scorer.metrics.base import Metric, Resources
from trace_scorer.metrics.registry import MetricRegistry, default_registry

AnyMetric = Metric[Any]


@dataclass
class TargetPlan:
    """A target ready to run: metrics grouped into dependency levels, KPIs in dependency order."""

    target: TargetSettings
    #: Per-sample metrics; a level's metrics depend only on earlier levels, so they may run concurrently.
    sample_levels: list[list[AnyMetric]]
    group_metrics: list[AnyMetric]
    #: KPIs computed per sample (none of their inputs is a group-only result).
    sample_kpis: list[Kpi]
    #: KPIs computed per group from the run-level values (every KPI is computed per group).
    group_kpis: list[Kpi]
    config_hash: str
    fingerprints: dict[str, str] = field(default_factory=dict)

    @property
    def sample_metrics(self) -> list[AnyMetric]:
        return [metric for level in self.sample_levels for metric in level]

    def sample_score_names(self) -> list[str]:
        return [name for m in self.sample_metrics for name in m.output_names()]

    def group_score_names(self) -> list[str]:
        return [name for m in self.group_metrics for name in m.output_names()]


class _Problems(list[str]):
    """What is wrong with a target, collected so that one run reports it all (issue 23)."""

    def add(self, where: str, message: str) -> None:
        self.append(f"{where}: {message}")

    def raise_any(self) -> None:
        if self:
            raise ConfigError("\n".join(self))


def _instantiate(
    target: TargetSettings, prefix: str, registry: MetricRegistry, resources: Resources, problems: _Problems
) -> dict[int, AnyMetric]:
    """The target's metrics by position in ``metrics``; an entry that cannot be built is a problem."""
    metrics: dict[int, AnyMetric] = {}
    for index, entry in enumerate(target.metrics):
        where = f"{prefix}.metrics[{index}]"
        cls = registry.get(entry.metric)
        if cls is None:
            known = registry.keys()
            hint = did_you_mean(entry.metric, known)
            problems.add(f"{where}.metric", f"unknown metric {entry.metric!r}{hint} (known: {', '.join(known)})")
            continue
        try:
            options = cls.Options.model_validate(entry.options)
        except ValidationError as exc:
            for error in exc.errors():
                key = format_location(tuple(error["loc"]))
                if error["type"] == "extra_forbidden":
                    message = "unknown option" + did_you_mean(str(error["loc"][-1]), cls.Options.model_fields)
                else:
                    message = error["msg"].removeprefix("Value error, ")
                problems.add(f"{where}.{key}" if key else where, message)
            continue
        metric = cls(entry.score_name, options, resources)
        try:
            metric.check()
        except ValueError as exc:
            problems.add(where, str(exc))
            continue
        metrics[index] = metric
    return metrics


def _check_names(
    metrics: dict[int, AnyMetric], target: TargetSettings, prefix: str, problems: _Problems
) -> dict[str, str]:
    """Map every score name to where it is defined; refuse duplicates and invalid generated names. An entry
    that could not be built still owns its score name (a KPI reading it is not told it is missing)."""
    owners: dict[str, str] = {}
    for index, entry in enumerate(target.metrics):
        where = f"{prefix}.metrics[{index}]"
        built = metrics.get(index)
        for name in built.output_names() if built is not None else [entry.score_name]:
            try:
                check_score_name(name)
            except ValueError as exc:
                problems.add(f"{where}.name", str(exc))
            if name in owners:
                problems.add(f"{where}.name", f"score name {name!r} is already used by {owners[name]}")
            owners.setdefault(name, where)
    for index, kpi in enumerate(target.kpis):
        where = f"{prefix}.kpis[{index}]"
        if kpi.name in owners:
            problems.add(f"{where}.name", f"score name {kpi.name!r} is already used by {owners[kpi.name]}")
        owners.setdefault(kpi.name, where)
    return owners


def _order(graph: dict[str, set[str]], what: str, prefix: str) -> list[str]:
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " → ".join(str(node) for node in exc.args[1])
        raise ConfigError(f"{prefix}: {what} dependency cycle: {cycle}") from None


def build_plans(
    targets: Sequence[TargetSettings], *, registry: MetricRegistry | None = None, resources: Resources | None = None
) -> list[TargetPlan]:
    """Every target's plan; the problems of all targets are reported together in one ConfigError."""
    plans: list[TargetPlan] = []
    problems = _Problems()
    for index, target in enumerate(targets):
        try:
            plans.append(build_plan(target, index=index, registry=registry, resources=resources))
        except ConfigError as exc:
            problems.append(str(exc))
    problems.raise_any()
    return plans


def raw_target_problems(entries: Any, source: str, *, registry: MetricRegistry | None = None) -> list[str]:
    """The plan problems (unknown metric, bad option, KPI naming a missing score…) of the ``[[targets]]``
    entries, as written in ``source``, that validate on their own: passed to ``load_settings`` so that a
    refused file's plan problems come in the same run as its settings problems (issue 23). An entry that
    does not validate is left out: its problems are already the settings'."""
    if not isinstance(entries, list):
        return []
    problems: list[str] = []
    for index, entry in enumerate(entries):
        try:
            target = TargetSettings.model_validate(entry)
        except ValidationError:
            continue
        try:
            build_plan(target, index=index, registry=registry)
        except ConfigError as exc:
            problems.extend(f"{source}: {line}" for line in str(exc).splitlines())
    return problems


def _check_kpis(
    target: TargetSettings, prefix: str, metric_names: Sequence[str], owners: dict[str, str], problems: _Problems
) -> None:
    """Each KPI builds, and names only scores the target computes."""
    for position, entry in enumerate(target.kpis):
        where = f"{prefix}.kpis[{position}]"
        try:
            kpi = build_kpi(entry, tuple(metric_names))
        except ExpressionError as exc:
            problems.add(f"{where}.expression", str(exc))
            continue
        except ValueError as exc:
            problems.add(where, str(exc))
            continue
        for name in kpi.inputs:
            if name not in owners:
                computed = ", ".join(owners) or "nothing"
                hint = did_you_mean(name, owners)
                problems.add(where, f"formula names {name!r}{hint}, which this target does not compute ({computed})")


def build_plan(
    target: TargetSettings,
    *,
    index: int = 0,
    registry: MetricRegistry | None = None,
    resources: Resources | None = None,
) -> TargetPlan:
    """Validate ``target`` (the ``index``-th in the settings) and order its metrics and KPIs."""
    prefix = f"targets[{index}]"
    registry = registry or default_registry()
    # Plug-in formats load here, at start-up, like the metrics': a broken one stops the command (exit 2)
    # instead of failing every trace's extraction later. Imported here: extract/ is not needed otherwise.
    from trace_scorer.extract.formats import installed_formats

    installed_formats()
    resources = resources or Resources()
    problems = _Problems()
    built = _instantiate(target, prefix, registry, resources, problems)
    owners = _check_names(built, target, prefix, problems)
    metrics = list(built.values())
    unbuilt = {entry.score_name for i, entry in enumerate(target.metrics) if i not in built}

    producer: dict[str, AnyMetric] = {name: m for m in metrics for name in m.output_names()}
    graph: dict[str, set[str]] = {}
    for position, metric in built.items():
        where = f"{prefix}.metrics[{position}]"
        needed: set[str] = set()
        for name in metric.reads():
            source = producer.get(name)
            if source is None:
                if name not in unbuilt:  # else its own entry's problem is reported
                    hint = did_you_mean(name, producer)
                    problems.add(where, f"reads {name!r}{hint}, which this target does not compute")
            elif source.per_group and not metric.per_group:
                problems.add(where, f"a per-sample metric cannot read the per-group result {name!r}")
            else:
                needed.add(source.name)
        graph[metric.name] = needed
    _check_kpis(target, prefix, [n for m in metrics if not m.per_group for n in m.output_names()], owners, problems)
    problems.raise_any()
    order = _order(graph, "metric", prefix)
    by_name = {m.name: m for m in metrics}

    # Levels: a metric sits one level after the deepest metric it reads.
    depth: dict[str, int] = {}
    for name in order:
        depth[name] = 1 + max((depth[dep] for dep in graph[name]), default=-1)
    sample_metrics = [by_name[n] for n in order if not by_name[n].per_group]
    levels: list[list[AnyMetric]] = [[] for _ in range(1 + max((depth[m.name] for m in sample_metrics), default=-1))]
    for metric in sample_metrics:
        levels[depth[metric.name]].append(metric)
    levels = [level for level in levels if level]
    group_metrics = [by_name[n] for n in order if by_name[n].per_group]

    metric_names = tuple(name for m in sample_metrics for name in m.output_names())
    kpis: dict[str, Kpi] = {}
    kpi_graph: dict[str, set[str]] = {}
    for entry in target.kpis:
        kpi = build_kpi(entry, metric_names)  # _check_kpis found no problem
        kpis[kpi.name] = kpi
        kpi_graph[kpi.name] = {name for name in kpi.inputs if owners[name].startswith(f"{prefix}.kpis")}
    kpi_order = [kpis[n] for n in _order(kpi_graph, "KPI", prefix)]

    group_only = {name for m in group_metrics for name in m.output_names()}
    sample_kpis = []
    for kpi in kpi_order:
        if any(name in group_only for name in kpi.inputs):
            group_only.add(kpi.name)
        else:
            sample_kpis.append(kpi)

    fingerprints = {name: m.fingerprint() for m in metrics for name in m.output_names()}
    for entry in target.kpis:
        fingerprints[entry.name] = hashlib.sha256(entry.model_dump_json().encode()).hexdigest()[:16]
    blob = json.dumps({"target": target.name, "scores": fingerprints}, sort_keys=True)
    return TargetPlan(
        target=target,
        sample_levels=levels,
        group_metrics=group_metrics,
        sample_kpis=sample_kpis,
        group_kpis=kpi_order,
        config_hash=hashlib.sha256(blob.encode()).hexdigest()[:16],
        fingerprints=fingerprints,
    )

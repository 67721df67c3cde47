"""Turn a target's configuration into a validated, ordered plan of metrics and KPIs.

Everything that can be wrong with a target is found here, once, at start-up: an unknown metric, bad
options, a duplicate or invalid score name, a read or formula naming something the target does not
compute, a dependency cycle. Each error names the key (``targets[0].metrics[1].mode``) and the reason.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

from pydantic import ValidationError

from trace_scorer.config.common import ConfigError, check_score_name
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


def _error(where: str, message: str) -> ConfigError:
    return ConfigError(f"{where}: {message}")


def _instantiate(
    target: TargetSettings, prefix: str, registry: MetricRegistry, resources: Resources
) -> list[AnyMetric]:
    metrics: list[AnyMetric] = []
    for index, entry in enumerate(target.metrics):
        where = f"{prefix}.metrics[{index}]"
        cls = registry.get(entry.metric)
        if cls is None:
            raise _error(f"{where}.metric", f"unknown metric {entry.metric!r} (known: {', '.join(registry.keys())})")
        try:
            options = cls.Options.model_validate(entry.options)
        except ValidationError as exc:
            first = exc.errors()[0]
            key = format_location(tuple(first["loc"]))
            message = "unknown option" if first["type"] == "extra_forbidden" else first["msg"]
            raise _error(f"{where}.{key}" if key else where, message.removeprefix("Value error, ")) from None
        metric = cls(entry.score_name, options, resources)
        try:
            metric.check()
        except ValueError as exc:
            raise _error(where, str(exc)) from None
        metrics.append(metric)
    return metrics


def _check_names(metrics: list[AnyMetric], target: TargetSettings, prefix: str) -> dict[str, str]:
    """Map every score name to where it is defined; refuse duplicates and invalid generated names."""
    owners: dict[str, str] = {}
    for index, metric in enumerate(metrics):
        for name in metric.output_names():
            where = f"{prefix}.metrics[{index}]"
            try:
                check_score_name(name)
            except ValueError as exc:
                raise _error(f"{where}.name", str(exc)) from None
            if name in owners:
                raise _error(f"{where}.name", f"score name {name!r} is already used by {owners[name]}")
            owners[name] = where
    for index, kpi in enumerate(target.kpis):
        where = f"{prefix}.kpis[{index}]"
        if kpi.name in owners:
            raise _error(f"{where}.name", f"score name {kpi.name!r} is already used by {owners[kpi.name]}")
        owners[kpi.name] = where
    return owners


def _order(graph: dict[str, set[str]], what: str, prefix: str) -> list[str]:
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " → ".join(str(node) for node in exc.args[1])
        raise _error(prefix, f"{what} dependency cycle: {cycle}") from None


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
    resources = resources or Resources()
    metrics = _instantiate(target, prefix, registry, resources)
    owners = _check_names(metrics, target, prefix)

    producer: dict[str, AnyMetric] = {name: m for m in metrics for name in m.output_names()}
    graph: dict[str, set[str]] = {}
    for position, metric in enumerate(metrics):
        where = f"{prefix}.metrics[{position}]"
        needed: set[str] = set()
        for name in metric.reads():
            source = producer.get(name)
            if source is None:
                raise _error(where, f"reads {name!r}, which this target does not compute")
            if source.per_group and not metric.per_group:
                raise _error(where, f"a per-sample metric cannot read the per-group result {name!r}")
            needed.add(source.name)
        graph[metric.name] = needed
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
    for position, entry in enumerate(target.kpis):
        where = f"{prefix}.kpis[{position}]"
        try:
            kpi = build_kpi(entry, metric_names)
        except ExpressionError as exc:
            raise _error(f"{where}.expression", str(exc)) from None
        except ValueError as exc:
            raise _error(where, str(exc)) from None
        for name in kpi.inputs:
            if name not in owners:
                computed = ", ".join(owners) or "nothing"
                raise _error(where, f"formula names {name!r}, which this target does not compute ({computed})")
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

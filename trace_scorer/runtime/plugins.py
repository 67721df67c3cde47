"""Entry-point plug-ins: the one loader behind the metric registry, the trace formats and the KPI formulas.

Third-party packages register a metric class under ``trace_scorer.metrics``, a message format
(:class:`~trace_scorer.extract.formats.base.Format` object) under ``trace_scorer.formats`` and a KPI
formula class under ``trace_scorer.kpi_formulas``. A plug-in that fails to load or is not what its group
expects is a :class:`PluginError` naming the entry point: the command stops at start-up (exit 2) rather
than score with a part of the configuration silently missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any

from trace_scorer.errors import UserError

METRICS_GROUP = "trace_scorer.metrics"
FORMATS_GROUP = "trace_scorer.formats"
KPI_FORMULAS_GROUP = "trace_scorer.kpi_formulas"


class PluginError(UserError):
    """An entry point could not be used (fails to load, or is not what its group expects)."""

    heading = "configuration error:\n"


def load_plugins(group: str, accept: Callable[[Any], bool], expected: str) -> Iterator[Any]:
    """The objects the installed entry points of ``group`` name, each checked by ``accept``.

    ``expected`` says what ``accept`` wants, for the error message ("a Metric class with a key").
    """
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginError(f"entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if not accept(obj):
            raise PluginError(f"entry point {ep.name!r} ({ep.value}) of {group} is not {expected}")
        yield obj

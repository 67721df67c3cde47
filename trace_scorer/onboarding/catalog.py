"""``trace-scorer metrics``: every registered metric (built-in and plug-ins) with the sample fields it
needs, what else it needs (a judge, an embedder) and its options, read from the metric classes themselves
so the list cannot drift from the code."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

from pydantic_core import PydanticUndefined

from trace_scorer.metrics.registry import MetricClass, MetricRegistry


@dataclass(frozen=True)
class OptionInfo:
    name: str
    type: str
    #: The default as JSON would hold it; absent (``required``) when the option must be given.
    default: Any
    required: bool


@dataclass(frozen=True)
class MetricInfo:
    key: str
    description: str
    #: ``trace_scorer.metrics.rouge`` for a built-in, the plug-in's module otherwise.
    module: str
    per_group: bool
    #: Sample fields that must be present (not null), else the sample is skipped with a reason.
    requires: list[str]
    #: ``judge`` (an LLM provider) and/or ``embedder`` (an embedding model).
    needs: list[str]
    options: list[OptionInfo]


#: What a metric's ``needs`` mean to a user.
_NEEDS = {"judge": "a judge model ([[providers]])", "embedder": "an embedding model ([embeddings])"}


def _type_name(annotation: Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return text.replace("typing.", "").replace("collections.abc.", "")


def _options(cls: MetricClass) -> list[OptionInfo]:
    infos = []
    for name, field in cls.Options.model_fields.items():
        required = field.default is PydanticUndefined and field.default_factory is None
        if required:
            default = None
        elif field.default_factory is not None:
            default = field.default_factory()  # type: ignore[call-arg]
        else:
            default = field.default
        infos.append(OptionInfo(name, _type_name(field.annotation), _jsonable(default), required))
    return infos


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def describe(cls: MetricClass) -> MetricInfo:
    doc = (cls.__doc__ or "").strip().splitlines()
    return MetricInfo(
        key=cls.key,
        description=cls.description or (doc[0] if doc else ""),
        module=cls.__module__,
        per_group=cls.per_group,
        requires=list(cls.requires),
        needs=list(cls.needs),
        options=_options(cls),
    )


def catalog(registry: MetricRegistry) -> list[MetricInfo]:
    """Every metric of ``registry`` (each module imported: listing is the one time all are loaded)."""
    return sorted((describe(cls) for cls in registry.classes()), key=lambda info: info.key)


def print_catalog(infos: list[MetricInfo], *, as_json: bool) -> None:
    """One JSON object per metric, or a table per metric for a reader."""
    if as_json:
        for info in infos:
            print(json.dumps(asdict(info), ensure_ascii=False))
        return
    from rich.markup import escape
    from rich.table import Table

    from trace_scorer.offline.report import table_console

    console = table_console()
    for info in infos:
        kind = "per group" if info.per_group else "per sample"
        needs = "".join(f"; needs {_NEEDS[need]}" for need in info.needs)
        source = "" if info.module.startswith("trace_scorer.metrics.") else f" (plug-in: {info.module})"
        console.print(f"[bold]{info.key}[/bold]{escape(source)} — {escape(info.description)}", highlight=False)
        inputs = ", ".join(info.requires) or "no sample field required"
        console.print(f"  {kind}; inputs: {inputs}{needs}", highlight=False, markup=False)
        if info.options:
            table = Table("option", "type", "default", box=None, padding=(0, 2), show_edge=False)
            for option in info.options:
                default = "(required)" if option.required else json.dumps(option.default, ensure_ascii=False)
                table.add_row(option.name, escape(option.type), escape(default))
            console.print(table)
        console.print()
    sys.stdout.flush()

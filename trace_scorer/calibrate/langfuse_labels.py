"""Labelled items from Langfuse: the people's scores (``source`` ANNOTATION, by name or score config,
optionally one annotation queue's) and the metric's scores with their details (each judge model's verdict,
votes and cost, in the score's ``metadata.details``), joined by trace, both read through ``GET /v3/scores``."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from trace_scorer.calibrate.items import LabelledSet, add_item, label_value
from trace_scorer.errors import UserError
from trace_scorer.langfuse import LangfuseClient, LangfuseNotFoundError
from trace_scorer.langfuse.score_reads import ScoreRow, list_scores

#: Sources of the metric's scores: the worker's (API) and Langfuse's own evaluators' (EVAL).
METRIC_SOURCES = ("API", "EVAL")


def _details(row: ScoreRow) -> Mapping[str, Any] | None:
    """The details the worker put in ``metadata.details`` (JSON text: Langfuse keeps metadata leaves as text)."""
    raw = row.metadata.get("details") if row.metadata else None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            return None
    return raw if isinstance(raw, Mapping) else None


async def read_labelled(
    client: LangfuseClient,
    metric: str,
    label: str,
    *,
    config_ids: Sequence[str] = (),
    queue_id: str | None = None,
    since: str,
) -> LabelledSet:
    """The metric's scores since ``since`` (and those of every labelled trace, whenever scored) beside the
    labels people gave since ``since``; one label per annotator and trace (their newest)."""
    found = LabelledSet(metric, label)
    labels: dict[str, dict[str, float]] = defaultdict(dict)
    try:
        async for row in list_scores(
            client.transport,
            names=() if config_ids else (label,),
            sources=("ANNOTATION",),
            config_ids=config_ids,
            queue_ids=(queue_id,) if queue_id else (),
            since=since,
            fields=("subject", "annotation"),
        ):
            if row.trace_id is None:
                found.leave_out("label on a session or a run, not a trace")
                continue
            value = label_value(row.value if row.value is not None else row.text)
            if value is None:
                found.leave_out(f"label {label!r} is not a number, a boolean or a verdict word")
                continue
            labels[row.trace_id].setdefault(row.author or row.id, value)  # newest first: an annotator's last
        rows: dict[str, list[ScoreRow]] = defaultdict(list)
        async for row in list_scores(
            client.transport, names=(metric,), sources=METRIC_SOURCES, since=since, fields=("subject", "details")
        ):
            if row.trace_id is not None:
                rows[row.trace_id].append(row)
        older = [t for t in labels if t not in rows]
        if older:
            async for row in list_scores(
                client.transport,
                names=(metric,),
                sources=METRIC_SOURCES,
                trace_ids=older,
                fields=("subject", "details"),
            ):
                if row.trace_id is not None:
                    rows[row.trace_id].append(row)
    except LangfuseNotFoundError:
        raise UserError(
            f"this Langfuse server ({client.capabilities.describe()}) cannot list scores (GET /api/public/v3/scores, "
            "self-hosted 3.179 or newer): calibrate a labelled file instead"
        ) from None
    for trace_id in sorted(set(rows) | set(labels)):
        scores = rows.get(trace_id, [])
        # The trace's own score first (observation-level ones only when the trace has none).
        chosen = next((r for r in scores if r.observation_id is None), scores[0] if scores else None)
        given = list(labels[trace_id].values()) if trace_id in labels else None
        add_item(
            found,
            trace_id,
            labels=given,
            value=chosen.value if chosen else None,
            details=_details(chosen) if chosen else None,
            trace_id=trace_id,
        )
    return found

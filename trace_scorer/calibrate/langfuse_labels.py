"""Labelled items from Langfuse: the people's scores (``source`` ANNOTATION, by name or score config,
optionally those on one annotation queue's items) and the metric's scores with their details (each judge
model's verdict, votes and cost, in the score's ``metadata.details``), joined by trace (and observation), both
read through ``GET /v3/scores``."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from trace_scorer.calibrate.items import LabelledSet, add_item, label_value
from trace_scorer.errors import UserError
from trace_scorer.langfuse import LangfuseClient, LangfuseNotFoundError
from trace_scorer.langfuse.reads.scores import ScoreRow, list_scores
from trace_scorer.langfuse.writes.annotation_queues import queue_items

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


async def _label_rows(
    client: LangfuseClient,
    label: str,
    *,
    config_ids: Sequence[str],
    queue_id: str | None,
    since: str,
) -> AsyncIterator[ScoreRow]:
    """The people's scores, newest first. With a queue: those on the objects its items name (a ``TRACE``
    item's trace, whenever labelled; an ``OBSERVATION`` item's observation, since ``since``) and those that
    carry the queue's id — a label given on a queued trace outside the queue's view carries no queue id."""
    names = () if config_ids else (label,)
    if queue_id is None:
        async for row in list_scores(
            client.transport,
            names=names,
            sources=("ANNOTATION",),
            config_ids=config_ids,
            since=since,
            fields=("subject", "annotation"),
        ):
            yield row
        return
    items = await queue_items(client.transport, queue_id)
    traces = {item.object_id for item in items if item.object_type == "TRACE"}
    observations = {item.object_id for item in items if item.object_type == "OBSERVATION"}
    seen: set[str] = set()
    if traces:
        # By trace id (no time bound): a queued trace's labels, each annotator's newest first.
        async for row in list_scores(
            client.transport,
            names=names,
            sources=("ANNOTATION",),
            config_ids=config_ids,
            trace_ids=sorted(traces),
            fields=("subject", "annotation"),
        ):
            if row.observation_id is None or row.observation_id in observations or row.queue_id == queue_id:
                seen.add(row.id)
                yield row
    # An observation is found by its trace, which the queue's item does not name: the labels since ``since``.
    async for row in list_scores(
        client.transport,
        names=names,
        sources=("ANNOTATION",),
        config_ids=config_ids,
        since=since,
        fields=("subject", "annotation"),
    ):
        if row.id in seen:
            continue
        if row.queue_id == queue_id or (row.observation_id is not None and row.observation_id in observations):
            yield row


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
    labels people gave since ``since`` (or on a queue's items, :func:`_label_rows`); one label per annotator
    and labelled object — a trace, or an observation, paired with the metric's score on that observation
    when it has one (its trace's otherwise) — their newest."""
    found = LabelledSet(metric, label)
    #: (trace, observation or None) → annotator → label.
    labels: dict[tuple[str, str | None], dict[str, float]] = defaultdict(dict)
    try:
        async for row in _label_rows(client, label, config_ids=config_ids, queue_id=queue_id, since=since):
            if row.trace_id is None:
                found.leave_out("label on a session or a run, not a trace")
                continue
            value = label_value(row.value if row.value is not None else row.text)
            if value is None:
                found.leave_out(f"label {label!r} is not a number, a boolean or a verdict word")
                continue
            # Newest first: an annotator's last.
            labels[(row.trace_id, row.observation_id)].setdefault(row.author or row.id, value)
        rows: dict[str, list[ScoreRow]] = defaultdict(list)
        async for row in list_scores(
            client.transport, names=(metric,), sources=METRIC_SOURCES, since=since, fields=("subject", "details")
        ):
            if row.trace_id is not None:
                rows[row.trace_id].append(row)
        older = sorted({t for t, _ in labels if t not in rows})
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
    labelled_traces = {t for t, _ in labels}
    keys = set(labels) | {(t, None) for t in rows if t not in labelled_traces}
    for trace_id, observation_id in sorted(keys, key=lambda k: (k[0], k[1] or "")):
        scores = rows.get(trace_id, [])
        # The labelled observation's own score, else the trace's (observation-level ones only when it has none).
        chosen = next((r for r in scores if observation_id is not None and r.observation_id == observation_id), None)
        if chosen is None:
            chosen = next((r for r in scores if r.observation_id is None), scores[0] if scores else None)
        given = list(labels[(trace_id, observation_id)].values()) if (trace_id, observation_id) in labels else None
        add_item(
            found,
            trace_id if observation_id is None else f"{trace_id}/{observation_id}",
            labels=given,
            value=chosen.value if chosen else None,
            details=_details(chosen) if chosen else None,
            trace_id=trace_id,
        )
    return found

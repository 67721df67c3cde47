"""The items people should label next: where the judge models disagree most with each other, or the metric's
verdict with the people's label — pushed into a Langfuse annotation queue (``--push-to-queue``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trace_scorer.calibrate.items import LabelledItem, LabelledSet
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.langfuse.writes.annotation_queues import add_trace, queued_objects


@dataclass(frozen=True)
class Disagreement:
    item: str
    trace_id: str | None
    #: The share of the models on the minority side, doubled: 0 unanimous, 1 an even split.
    judges: float
    #: Whether the metric's verdict differs from the people's label (None: not labelled).
    against_label: bool | None

    @property
    def weight(self) -> float:
        """What it teaches: a verdict against the label counts as a full split of the judges."""
        return self.judges + (1.0 if self.against_label else 0.0)

    def as_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "trace_id": self.trace_id,
            "judges": round(self.judges, 6),
            "against_label": self.against_label,
        }


def _judges(item: LabelledItem) -> float:
    if len(item.models) < 2:
        return 0.0
    passing = sum(1 for value in item.models.values() if value >= 0.5) / len(item.models)
    return 2 * min(passing, 1 - passing)


def _verdict(item: LabelledItem, threshold: float) -> float | None:
    if item.value is not None:
        return 1.0 if item.value >= threshold else 0.0
    if item.models:
        return 1.0 if sum(1 for v in item.models.values() if v >= 0.5) * 2 > len(item.models) else 0.0
    return None


def rank(found: LabelledSet, *, threshold: float, binary: bool) -> list[Disagreement]:
    """Every item with some disagreement, the most first (unlabelled items by their judges only)."""
    out = []
    for item in [*found.items, *found.unlabelled]:
        against: bool | None = None
        if item.labels and binary:
            verdict = _verdict(item, threshold)
            against = verdict is not None and verdict != (1.0 if item.label >= 0.5 else 0.0)
        entry = Disagreement(item.id, item.trace_id, _judges(item), against)
        if entry.weight > 0:
            out.append(entry)
    out.sort(key=lambda d: (-d.weight, d.item))
    return out


@dataclass
class Pushed:
    queue: str
    added: list[str]
    already: list[str]
    no_trace: int

    def as_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "added": self.added, "already": self.already, "no_trace": self.no_trace}


async def push(client: LangfuseClient, queue_id: str, ranked: Sequence[Disagreement], limit: int) -> Pushed:
    """The first ``limit`` ranked items with a trace, each added once: a trace the queue holds is left as it is
    (Langfuse adds the same trace twice as two items)."""
    held = await queued_objects(client.transport, queue_id)
    out = Pushed(queue_id, [], [], 0)
    for entry in ranked:
        if len(out.added) + len(out.already) >= limit:
            break
        if entry.trace_id is None:
            out.no_trace += 1
            continue
        if entry.trace_id in held:
            out.already.append(entry.trace_id)
            continue
        await add_trace(client.transport, queue_id, entry.trace_id)
        held.add(entry.trace_id)
        out.added.append(entry.trace_id)
    return out

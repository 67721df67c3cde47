"""Labelled items: a metric's value (the panel's), each judge model's value, its strictness votes and its cost
on one item, beside the humans' labels of that item.

Read from ``score --json`` lines with a ``labels`` object added, or from scored samples whose
``metadata.labels`` holds them (docs/calibrate.md, "Labelled files").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trace_scorer.errors import UserError

#: Text labels read as a verdict (case-insensitive); any other text is not a label.
TRUE_WORDS = frozenset({"true", "pass", "yes", "correct", "good", "1"})
FALSE_WORDS = frozenset({"false", "fail", "no", "incorrect", "bad", "0"})


@dataclass
class LabelledItem:
    """One item: the humans' labels (one per annotator) and what the metric and each of its models said."""

    id: str
    labels: list[float]
    value: float | None = None
    trace_id: str | None = None
    models: dict[str, float] = field(default_factory=dict)
    votes: dict[str, list[int]] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> float:
        """The humans' consensus: their mean (binary labels are read as a verdict at 0.5: a majority)."""
        return sum(self.labels) / len(self.labels)


@dataclass
class LabelledSet:
    """The items of one metric that have a label, with what was left out and why."""

    metric: str
    label: str
    items: list[LabelledItem] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    #: Items with the metric's value but no label (``labels`` empty): candidates for people to label next.
    unlabelled: list[LabelledItem] = field(default_factory=list)

    def leave_out(self, reason: str) -> None:
        self.left_out[reason] = self.left_out.get(reason, 0) + 1

    @property
    def models(self) -> list[str]:
        """Every judge model seen, in the order first seen."""
        return list(dict.fromkeys(m for item in self.items for m in item.models))


def label_value(raw: Any) -> float | None:
    """A human label as a number: booleans 1/0, finite numbers as they are, verdict words; else None."""
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, int | float):
        return float(raw) if math.isfinite(raw) else None
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in TRUE_WORDS:
            return 1.0
        if word in FALSE_WORDS:
            return 0.0
        try:
            number = float(word)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def labels_of(raw: Any) -> list[float] | None:
    """One label or a list of them (one per annotator); None when any is not a label."""
    values = raw if isinstance(raw, list) else [raw]
    out = [label_value(v) for v in values]
    if not out or any(v is None for v in out):
        return None
    return [v for v in out if v is not None]


def _judged(details: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, list[int]], dict[str, float]]:
    """Each model's value, votes and cost from a judged score's details (``details["models"]``)."""
    values: dict[str, float] = {}
    votes: dict[str, list[int]] = {}
    costs: dict[str, float] = {}
    models = details.get("models")
    if not isinstance(models, Mapping):
        return values, votes, costs
    for model, entry in models.items():
        if not isinstance(entry, Mapping):
            continue
        value = entry.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            values[str(model)] = float(value)
        raw_votes = entry.get("votes")
        if isinstance(raw_votes, list) and raw_votes:
            read = [label_value(v) for v in raw_votes]
            if all(v is not None for v in read):
                votes[str(model)] = [int(v) for v in read if v is not None]
        cost = entry.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            costs[str(model)] = float(cost)
    return values, votes, costs


def add_item(
    found: LabelledSet,
    item_id: str,
    *,
    labels: Any,
    value: Any,
    details: Mapping[str, Any] | None,
    trace_id: str | None = None,
) -> None:
    """One record's item into ``found``, or the reason it is left out."""
    read = labels_of(labels) if labels is not None else []
    if read is None:
        found.leave_out(f"label {found.label!r} is not a number, a boolean or a verdict word")
        return
    models, votes, costs = _judged(details or {})
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None and not models:
        found.leave_out(f"no {found.metric} value (skipped or failed)")
        return
    item = LabelledItem(
        id=item_id,
        labels=read,
        value=float(number) if number is not None else None,
        trace_id=trace_id,
        models=models,
        votes=votes,
        costs=costs,
    )
    if not read:
        found.leave_out(f"no label {found.label!r}")
        found.unlabelled.append(item)
        return
    found.items.append(item)


def from_score_lines(records: Iterable[Mapping[str, Any]], metric: str, label: str) -> LabelledSet:
    """Items from ``score --json`` lines carrying ``labels``: ``{"id", "scores", "judges", "labels"}``."""
    found = LabelledSet(metric, label)
    for position, record in enumerate(records):
        labels = record.get("labels")
        if labels is not None and not isinstance(labels, Mapping):
            raise UserError(f"record {position + 1}: 'labels' must be an object of label name → value")
        scores, kpis = record.get("scores"), record.get("kpis")
        value = scores.get(metric) if isinstance(scores, Mapping) else None
        if value is None and isinstance(kpis, Mapping):
            value = kpis.get(metric)
        judges = record.get("judges")
        details = judges.get(metric) if isinstance(judges, Mapping) else None
        # ``score`` names a sample read from exported traces by its trace id.
        item_id = str(record.get("id", position + 1))
        trace_id = record.get("trace_id", record.get("id"))
        add_item(
            found,
            item_id,
            labels=(labels or {}).get(label),
            value=value,
            details=details if isinstance(details, Mapping) else None,
            trace_id=trace_id if isinstance(trace_id, str) else None,
        )
    return found

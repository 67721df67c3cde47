"""Offline input: files of exported observation rows (and experiment items), many traces at once.

The CLI reads each JSON/JSONL record and asks :func:`looks_like_observation_row` /
:func:`looks_like_experiment_item` what it is; rows are grouped by ``traceId`` into samples and joined
with items by ``traceId``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract.extractor import extract_sample
from trace_scorer.extract.observations import observation_samples
from trace_scorer.sample import Sample

#: Keys of sample records (docs/sample-format): a record with any of them is not an observation row.
SAMPLE_KEYS = frozenset(
    {
        "messages",
        "response",
        "tool_calls",
        "expected",
        "reference",
        "reference_tool_calls",
        "reference_topics",
    }
)
OBSERVATION_KEYS = frozenset({"type", "parentObservationId"})
ITEM_KEYS = frozenset({"expectedOutput", "experimentId", "experimentItemId", "datasetItemId", "datasetRunId"})


def looks_like_observation_row(obj: Any) -> bool:
    """An exported ``/v2/observations`` row: ``id`` + ``traceId`` + ``type`` or ``parentObservationId``
    (both in the always-returned ``core`` fields), and no sample or experiment-item key."""
    return (
        isinstance(obj, Mapping)
        and "id" in obj
        and "traceId" in obj
        and not OBSERVATION_KEYS.isdisjoint(obj)
        and SAMPLE_KEYS.isdisjoint(obj)
        and ITEM_KEYS.isdisjoint(obj)
    )


def looks_like_experiment_item(obj: Any) -> bool:
    """An experiment item / dataset-run item: a ``traceId`` and an item field, and not an observation
    (experiment items have no ``type``)."""
    return (
        isinstance(obj, Mapping)
        and "traceId" in obj
        and "type" not in obj
        and not ITEM_KEYS.isdisjoint(obj)
        and SAMPLE_KEYS.isdisjoint(obj)
    )


def index_items(items: Iterable[Any]) -> tuple[dict[str, Mapping[str, Any]], list[tuple[int, str]]]:
    """Items keyed by ``traceId``, and what could not be used: (position in ``items``, reason)."""
    index: dict[str, Mapping[str, Any]] = {}
    problems: list[tuple[int, str]] = []
    for position, item in enumerate(items):
        trace_id = item.get("traceId") if isinstance(item, Mapping) else None
        if not isinstance(trace_id, str) or not trace_id:
            problems.append((position, "experiment item without a traceId: it cannot be joined to a trace"))
            continue
        if trace_id in index:
            problems.append((position, f"a second experiment item for trace {trace_id}: this later one is used"))
        index[trace_id] = item
    return index, problems


def samples_from_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    items: Mapping[str, Mapping[str, Any]] | None = None,
    references: ReferenceSettings | None = None,
    observations: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Iterator[Sample]:
    """One sample per trace, in the order traces first appear; then one per item whose trace has no
    rows (read from the item alone: its output is the response). Rows without a ``traceId`` form
    one trace of their own. ``observations`` (scope = "observation"): one sample per matching
    observation of each trace instead (items are not read: they belong to traces)."""
    groups: dict[str | None, list[Mapping[str, Any]]] = {}
    for row in rows:
        trace_id = row.get("traceId") if isinstance(row, Mapping) else None
        key = trace_id if isinstance(trace_id, str) and trace_id else None
        groups.setdefault(key, []).append(row)
    if observations is not None:
        for trace_id, group in groups.items():
            yield from observation_samples(group, observations, trace_id=trace_id or "", references=references)
        return
    items = items or {}
    for trace_id, group in groups.items():
        item = items.get(trace_id) if trace_id is not None else None
        yield extract_sample(group, item=item, references=references, trace_id=trace_id)
    for trace_id, item in items.items():
        if trace_id not in groups:
            yield extract_sample((), item=item, references=references, trace_id=trace_id)

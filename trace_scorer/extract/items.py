"""The experiment item extraction is given by the worker: typed (the Langfuse adapter's
``ExperimentItem``), read through its attributes, and the document the references' JSON paths see.

Extraction does not import the adapter (the adapter imports extraction), so the item's type is the
protocol of the attributes read here; offline, items are JSON objects read from a file and are their own
document.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

__all__ = ["TypedItem", "item_document"]


@runtime_checkable
class TypedItem(Protocol):
    """What extraction reads of a typed experiment item (``langfuse.types.ExperimentItem``)."""

    @property
    def trace_id(self) -> str: ...
    @property
    def observation_id(self) -> str | None: ...
    @property
    def experiment_id(self) -> str: ...
    @property
    def experiment_name(self) -> str: ...
    @property
    def dataset_item_id(self) -> str: ...
    @property
    def dataset_id(self) -> str | None: ...
    @property
    def start_time(self) -> datetime: ...
    @property
    def environment(self) -> str | None: ...
    @property
    def input(self) -> Any: ...
    @property
    def output(self) -> Any: ...
    @property
    def expected_output(self) -> Any: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...
    @property
    def item_metadata(self) -> Mapping[str, Any]: ...


def item_document(item: TypedItem) -> dict[str, Any]:
    """The item as the references' JSON paths read it (``$.expectedOutput``, ``$.experimentItemMetadata``…):
    the experiment-items API's camelCase names, as an exported item has them."""
    return {
        "id": item.observation_id,
        "traceId": item.trace_id,
        "startTime": item.start_time.isoformat(),
        "environment": item.environment,
        "experimentId": item.experiment_id,
        "experimentName": item.experiment_name,
        "experimentItemId": item.dataset_item_id,
        "experimentDatasetId": item.dataset_id,
        "input": item.input,
        "output": item.output,
        "expectedOutput": item.expected_output,
        "metadata": dict(item.metadata),
        "experimentItemMetadata": dict(item.item_metadata),
    }

"""The data a test gives the in-process Langfuse (:mod:`tests.support.langfuse_inprocess`), and the
answers it scripts: each payload checked against the contract as it is built.

v4 payloads are accepted by the ``langfuse`` package's models, v3 (legacy) payloads by our models of
their shapes (:mod:`standins.contract.legacy`). Times are ISO strings with ``Z``; pass datetimes or strings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from standins import langfuse_query as q
from standins.contract import get_contract
from standins.formats import PROJECT_ID, encode_io

T0 = datetime(2026, 10, 1, 0, 0, 0, tzinfo=UTC)
B = TypeVar("B")


def iso(value: datetime | str | None) -> str | None:
    """Langfuse's time format (a string or None as it is)."""
    return value if value is None or isinstance(value, str) else q.iso(value)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``: readable test times."""
    return T0 + timedelta(seconds=seconds)


def _check(method: str, template: str, body: B, status: int = 200) -> B:
    get_contract().check_response(method, template, status, body)
    return body


@dataclass
class Reply:
    """An answer a test scripts for a route: status, JSON body, headers."""

    status: int = 200
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Why this answer is not checked against the contract (a real server's answer the file and the
    #: package's models do not describe, e.g. an older version's), or None to check it.
    unchecked: str | None = None


def error(message: str = "boom", status: int = 500, **headers: str) -> Reply:
    body = {"message": message}
    return Reply(status, body, dict(headers))


# --- score configs ------------------------------------------------------------------------------


def score_config(
    config_id: str,
    name: str,
    *,
    data_type: str = "NUMERIC",
    min_value: float | None = 0.0,
    max_value: float | None = 1.0,
    archived: bool = False,
    categories: list[dict[str, Any]] | None = None,
    created: datetime | str | None = None,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "id": config_id,
        "name": name,
        "createdAt": iso(created or T0),
        "updatedAt": iso(created or T0),
        "projectId": PROJECT_ID,
        "dataType": data_type,
        "isArchived": archived,
        "minValue": min_value if data_type == "NUMERIC" else None,
        "maxValue": max_value if data_type == "NUMERIC" else None,
        "categories": categories,
        "description": None,
    }
    return _check("POST", "/api/public/score-configs", config)


def score_configs_page(
    configs: list[dict[str, Any]], *, page: int = 1, limit: int = 100, total: int | None = None
) -> dict[str, Any]:
    total = len(configs) if total is None else total
    meta = {"page": page, "limit": limit, "totalItems": total, "totalPages": max(1, -(-total // limit))}
    return _check("GET", "/api/public/score-configs", {"data": configs, "meta": meta})


# --- v4 observations ------------------------------------------------------------------------------


def observation(
    obs_id: str,
    trace_id: str,
    start: datetime | str,
    *,
    end: datetime | str | None = None,
    type: str = "SPAN",
    name: str | None = None,
    parent: str | None = None,
    root: bool | None = None,
    input: Any = None,
    output: Any = None,
    metadata: dict[str, Any] | None = None,
    environment: str = "production",
    updated: datetime | str | None = None,
    user_id: str | None = None,
    session_id: str | None = None,
    tags: list[str] | None = None,
    trace_name: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """A v4 observation row with every field group (input/output as raw JSON strings, as v4 sends)."""
    is_root = parent is None if root is None else root
    row: dict[str, Any] = {
        "id": obs_id,
        "traceId": trace_id,
        "startTime": iso(start),
        "endTime": iso(end),
        "projectId": PROJECT_ID,
        "parentObservationId": parent,
        "type": type,
        "isRootObservation": is_root,
        "name": name,
        "level": "DEFAULT",
        "statusMessage": "",
        "version": "",
        "environment": environment,
        "bookmarked": False,
        "public": False,
        "userId": user_id,
        "sessionId": session_id,
        "completionStartTime": None,
        "createdAt": iso(start),
        "updatedAt": iso(updated or end or start),
        "input": input if input is None or isinstance(input, str) else json.dumps(input),
        "output": output if output is None or isinstance(output, str) else json.dumps(output),
        "metadata": metadata or {},
        "model": model,
        "internalModelId": None,
        "modelParameters": None,
        "tags": tags or [],
        "release": None,
        "traceName": trace_name,
    }
    observations_page([row])
    return row


def observations_page(rows: list[dict[str, Any]], cursor: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"data": rows, "meta": {"cursor": cursor} if cursor else {}}
    return _check("GET", "/api/public/v2/observations", body)


# --- v4 datasets and experiments ---------------------------------------------------------------


def dataset(dataset_id: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": dataset_id,
        "name": name,
        "description": None,
        "metadata": {},
        "inputSchema": None,
        "expectedOutputSchema": None,
        "projectId": PROJECT_ID,
        "createdAt": iso(T0),
        "updatedAt": iso(T0),
    }
    return _check("GET", "/api/public/v2/datasets/{datasetName}", body)


def dataset_item(
    item_id: str,
    dataset_id: str,
    dataset_name: str,
    *,
    input: Any = None,
    expected_output: Any = None,
    metadata: Any = None,
) -> dict[str, Any]:
    body = {
        "id": item_id,
        "status": "ACTIVE",
        "input": input,
        "expectedOutput": expected_output,
        "metadata": metadata,
        "sourceTraceId": None,
        "sourceObservationId": None,
        "datasetId": dataset_id,
        "datasetName": dataset_name,
        "createdAt": iso(T0),
        "updatedAt": iso(T0),
        "mediaReferences": [],
    }
    return _check("GET", "/api/public/dataset-items/{id}", body)


def experiment(
    experiment_id: str,
    name: str,
    dataset_id: str | None,
    start: datetime | str,
    *,
    end: datetime | str | None = None,
    item_count: int = 1,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    row = {
        "id": experiment_id,
        "name": name,
        "description": None,
        "startTime": iso(start),
        "endTime": iso(end or start),
        "itemCount": item_count,
        "datasetId": dataset_id,
        "metadata": metadata or {},
    }
    experiments_page([row])
    return row


def experiments_page(rows: list[dict[str, Any]], cursor: str | None = None) -> dict[str, Any]:
    return _check("GET", "/api/public/experiments", {"data": rows, "meta": {"cursor": cursor}})


def experiment_item(
    root_id: str,
    trace_id: str,
    experiment_id: str,
    experiment_name: str,
    item_id: str,
    start: datetime | str,
    *,
    dataset_id: str | None = "ds-1",
    input: Any = None,
    output: Any = None,
    expected_output: Any = None,
    metadata: dict[str, Any] | None = None,
    item_metadata: dict[str, Any] | None = None,
    environment: str = "sdk-experiment",
) -> dict[str, Any]:
    """An experiment-items row as real servers send it: ``input``/``output``/``expectedOutput`` raw
    strings (non-strings JSON-encoded), ``expectedOutput`` always present and ``""`` when the runner
    recorded none (``expected_output=None``)."""
    row: dict[str, Any] = {
        "id": root_id,
        "traceId": trace_id,
        "startTime": iso(start),
        "endTime": iso(start),
        "level": "DEFAULT",
        "environment": environment,
        "experimentId": experiment_id,
        "experimentName": experiment_name,
        "experimentItemId": item_id,
        "experimentDatasetId": dataset_id,
        "experimentItemVersion": iso(T0),
        "input": encode_io(input, raw_strings=True),
        "output": encode_io(output, raw_strings=True),
        "expectedOutput": "" if expected_output is None else encode_io(expected_output, raw_strings=True),
        "metadata": metadata or {},
        "experimentItemMetadata": item_metadata or {},
    }
    experiment_items_page([row])
    return row


def experiment_items_page(rows: list[dict[str, Any]], cursor: str | None = None) -> dict[str, Any]:
    return _check("GET", "/api/public/experiment-items", {"data": rows, "meta": {"cursor": cursor}})


# --- v3 legacy ---------------------------------------------------------------------------------


def v3_dataset_run(
    run_id: str,
    name: str,
    dataset_id: str,
    dataset_name: str,
    created: datetime | str,
    updated: datetime | str | None = None,
) -> dict[str, Any]:
    run = {
        "id": run_id,
        "name": name,
        "description": None,
        "metadata": {"model": "x"},
        "datasetId": dataset_id,
        "datasetName": dataset_name,
        "createdAt": iso(created),
        "updatedAt": iso(updated or created),
    }
    v3_dataset_runs_page([run])
    return run


def v3_dataset_runs_page(
    runs: list[dict[str, Any]], *, page: int = 1, limit: int = 100, total: int | None = None
) -> dict[str, Any]:
    body = {"data": runs, "meta": q.page_meta(page, limit, len(runs) if total is None else total)}
    return _check("GET", "/api/public/datasets/{datasetName}/runs", body)


def v3_dataset_run_item(
    item_id: str,
    run: dict[str, Any],
    dataset_item_id: str,
    trace_id: str,
    created: datetime | str,
    observation_id: str | None = None,
) -> dict[str, Any]:
    row = {
        "id": item_id,
        "datasetRunId": run["id"],
        "datasetRunName": run["name"],
        "datasetItemId": dataset_item_id,
        "traceId": trace_id,
        "observationId": observation_id,
        "createdAt": iso(created),
        "updatedAt": iso(created),
    }
    v3_dataset_run_items_page([row])
    return row


def v3_dataset_run_items_page(
    rows: list[dict[str, Any]], *, page: int = 1, limit: int = 100, total: int | None = None
) -> dict[str, Any]:
    body = {"data": rows, "meta": q.page_meta(page, limit, len(rows) if total is None else total)}
    return _check("GET", "/api/public/dataset-run-items", body)

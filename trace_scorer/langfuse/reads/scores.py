"""Reading scores back: ``GET /api/public/v3/scores`` by trace ids, for ``trace-scorer compare``; any
score by name, source, score config or annotation queue, for ``trace-scorer calibrate`` (:func:`list_scores`).

Both generations serve it (self-hosted from 3.179; not 2.x, which answers 404). The worker never reads
scores (its ledger says what it posted), so this endpoint is in none of the worker's route tuples of
:mod:`.endpoints`. Numeric values are taken as they are, booleans as 1/0; categorical and text scores
have no mean and are left out. ``traceId`` and the other subject filters are comma-separated lists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trace_scorer.langfuse.errors import LangfuseResponseError
from trace_scorer.langfuse.http.endpoints import SCORES_V3
from trace_scorer.langfuse.http.transport import QueryValue, Transport

#: The server's page limit (above it: 400).
SCORES_MAX_LIMIT = 100
#: Trace ids per request: keeps the query string short (ids are 32 hex characters).
TRACE_IDS_PER_REQUEST = 50


@dataclass(frozen=True, slots=True)
class StoredScore:
    """A numeric or boolean score on a trace (or one of its observations), as Langfuse holds it."""

    id: str
    name: str
    value: float
    trace_id: str
    observation_id: str | None


def _stored(row: Mapping[str, Any]) -> StoredScore | None:
    value = row.get("value")
    if isinstance(value, bool):
        number = 1.0 if value else 0.0
    elif isinstance(value, int | float) and row.get("dataType", "NUMERIC") in ("NUMERIC", "BOOLEAN"):
        number = float(value)
    else:
        return None  # categorical or text: no mean
    subject = row.get("subject")
    if not isinstance(subject, Mapping):
        return None
    kind = subject.get("kind")
    if kind == "trace":
        trace_id, observation_id = subject.get("id"), None
    elif kind == "observation":
        trace_id, observation_id = subject.get("traceId"), subject.get("id")
    else:
        return None
    if not isinstance(trace_id, str):
        return None
    return StoredScore(str(row["id"]), str(row["name"]), number, trace_id, observation_id)


async def trace_scores(
    transport: Transport, trace_ids: Sequence[str], names: Sequence[str] | None = None
) -> AsyncIterator[StoredScore]:
    """Every numeric/boolean score on these traces (on the trace or one of its observations), optionally
    only these names; each score once."""
    seen: set[str] = set()
    unique = list(dict.fromkeys(trace_ids))
    for start in range(0, len(unique), TRACE_IDS_PER_REQUEST):
        params: dict[str, QueryValue] = {
            "traceId": ",".join(unique[start : start + TRACE_IDS_PER_REQUEST]),
            "fields": "subject",
            "limit": SCORES_MAX_LIMIT,
        }
        if names:
            params["name"] = ",".join(names)
        async for row in _pages(transport, params):
            if row.get("id") in seen:
                continue
            stored = _stored(row)
            if stored is not None:
                seen.add(stored.id)
                yield stored


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """Any score as ``GET /v3/scores`` lists it, for ``calibrate``: the value as a number (numeric, boolean)
    or as text (categorical), its source, its annotator and queue, and its metadata."""

    id: str
    name: str
    value: float | None
    text: str | None
    source: str
    trace_id: str | None
    observation_id: str | None
    author: str | None
    queue_id: str | None
    metadata: Mapping[str, Any] | None


def _row(row: Mapping[str, Any]) -> ScoreRow:
    value = row.get("value")
    number: float | None = None
    text: str | None = None
    if isinstance(value, bool):
        number = 1.0 if value else 0.0
    elif isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value
    subject = row.get("subject") if isinstance(row.get("subject"), Mapping) else {}
    assert isinstance(subject, Mapping)
    kind = subject.get("kind")
    trace_id = subject.get("id") if kind == "trace" else subject.get("traceId") if kind == "observation" else None
    metadata = row.get("metadata")
    return ScoreRow(
        id=str(row.get("id")),
        name=str(row.get("name")),
        value=number,
        text=text,
        source=str(row.get("source") or "API").upper(),
        trace_id=trace_id if isinstance(trace_id, str) else None,
        observation_id=subject.get("id") if kind == "observation" else None,
        author=row.get("authorUserId") if isinstance(row.get("authorUserId"), str) else None,
        queue_id=row.get("queueId") if isinstance(row.get("queueId"), str) else None,
        metadata=metadata if isinstance(metadata, Mapping) else None,
    )


async def list_scores(
    transport: Transport,
    *,
    names: Sequence[str] = (),
    sources: Sequence[str] = (),
    config_ids: Sequence[str] = (),
    queue_ids: Sequence[str] = (),
    trace_ids: Sequence[str] = (),
    since: str | None = None,
    fields: Sequence[str] = ("subject",),
) -> AsyncIterator[ScoreRow]:
    """Every score matching the filters (each a comma-separated list; AND across them), each once, page by
    page along the server's cursor; trace ids asked :data:`TRACE_IDS_PER_REQUEST` at a time. ``fields``: the
    groups asked besides the core ones (``subject``, ``details`` for the metadata, ``annotation`` for the
    annotator and the queue)."""
    seen: set[str] = set()
    unique = list(dict.fromkeys(trace_ids))
    for start in range(0, len(unique), TRACE_IDS_PER_REQUEST) if unique else [0]:
        chunk = unique[start : start + TRACE_IDS_PER_REQUEST]
        async for row in _list_scores(transport, names, sources, config_ids, queue_ids, chunk, since, fields):
            if row.id not in seen:
                seen.add(row.id)
                yield row


async def _list_scores(
    transport: Transport,
    names: Sequence[str],
    sources: Sequence[str],
    config_ids: Sequence[str],
    queue_ids: Sequence[str],
    trace_ids: Sequence[str],
    since: str | None,
    fields: Sequence[str],
) -> AsyncIterator[ScoreRow]:
    params: dict[str, QueryValue] = {"limit": SCORES_MAX_LIMIT, "fields": ",".join(fields)}
    filters = (
        ("name", names),
        ("source", sources),
        ("configId", config_ids),
        ("queueId", queue_ids),
        ("traceId", trace_ids),
    )
    for key, values in filters:
        if values:
            params[key] = ",".join(values)
    if since is not None:
        params["fromTimestamp"] = since
    async for raw in _pages(transport, params):
        yield _row(raw)


async def _pages(transport: Transport, params: Mapping[str, QueryValue]) -> AsyncIterator[Mapping[str, Any]]:
    """The score rows of ``GET /v3/scores`` with these parameters, page by page along the server's
    cursor; a cursor the server gives twice is an error (it would loop)."""
    cursor: str | None = None
    cursors: set[str] = set()
    while True:
        answer = await transport.plain(
            SCORES_V3, SCORES_V3.path, params={**params, **({"cursor": cursor} if cursor else {})}
        )
        body = answer.body
        if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
            raise LangfuseResponseError(endpoint=SCORES_V3.label, detail="no data list in the answer")
        for raw in body["data"]:
            if isinstance(raw, Mapping):
                yield raw
        meta = body.get("meta")
        cursor = meta.get("cursor") if isinstance(meta, Mapping) else None
        if not cursor:
            break
        if cursor in cursors:
            raise LangfuseResponseError(endpoint=SCORES_V3.label, detail=f"the cursor {cursor!r} repeated")
        cursors.add(cursor)

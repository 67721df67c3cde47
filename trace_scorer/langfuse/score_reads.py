"""Reading scores back: ``GET /api/public/v3/scores`` by trace ids, for ``trace-scorer compare``.

Both generations serve it (self-hosted from 3.179; not 2.x, which answers 404). The worker never reads
scores (its ledger says what it posted), so this endpoint is in none of the worker's route tuples of
:mod:`.endpoints`. Numeric values are taken as they are, booleans as 1/0; categorical and text scores
have no mean and are left out. ``traceId`` and the other subject filters are comma-separated lists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trace_scorer.langfuse.endpoints import Endpoint
from trace_scorer.langfuse.errors import LangfuseResponseError
from trace_scorer.langfuse.transport import QueryValue, Transport

SCORES_V3 = Endpoint("GET", "/api/public/v3/scores")
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
        cursor: str | None = None
        cursors: set[str] = set()
        while True:
            answer = await transport.plain(
                SCORES_V3, SCORES_V3.path, params={**params, **({"cursor": cursor} if cursor else {})}
            )
            body = answer.body
            if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
                raise LangfuseResponseError(endpoint=SCORES_V3.label, detail="no data list in the answer")
            for row in body["data"]:
                if not isinstance(row, Mapping) or row.get("id") in seen:
                    continue
                stored = _stored(row)
                if stored is not None:
                    seen.add(stored.id)
                    yield stored
            meta = body.get("meta")
            cursor = meta.get("cursor") if isinstance(meta, Mapping) else None
            if not cursor:
                break
            if cursor in cursors:
                raise LangfuseResponseError(endpoint=SCORES_V3.label, detail=f"the cursor {cursor!r} repeated")
            cursors.add(cursor)

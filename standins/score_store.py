"""Scores as Langfuse keeps them: upserted on ``id`` + ``name`` + the *date* of ``timestamp``.

Re-posting a score with the same three *merges* into it as Langfuse's ``overwriteObject`` does
(``worker/src/services/IngestionService/utils.ts``): a field the new body lacks keeps its old value, an
explicit ``null`` overwrites, an empty object keeps the old value, ``metadata`` is deep-merged, and
``id``, ``timestamp``, ``traceId``, ``environment`` and ``createdAt`` never change. A different date (or
name) with the same id is a second row (Langfuse's reads de-duplicate by id; :meth:`ScoreStore.latest_by_id`).
The store counts both, so a test can assert "exactly one score per (trace, name)".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: (kind, id) of what a score is attached to: ("trace", traceId), ("observation", "traceId/obsId"),
#: ("session", sessionId), ("experiment", datasetRunId).
Subject = tuple[str, str]


def subject_of(body: dict[str, Any]) -> Subject:
    if body.get("observationId"):
        return ("observation", f"{body.get('traceId')}/{body['observationId']}")
    if body.get("traceId"):
        return ("trace", str(body["traceId"]))
    if body.get("sessionId"):
        return ("session", str(body["sessionId"]))
    if body.get("datasetRunId"):
        return ("experiment", str(body["datasetRunId"]))
    return ("none", "")


@dataclass(slots=True)
class StoredScore:
    body: dict[str, Any]
    #: The score's timestamp (given, or when it was received).
    timestamp: str
    #: ``POST /scores`` or ``/ingestion``.
    via: str
    first_received: str
    last_received: str
    writes: int = 1

    @property
    def subject(self) -> Subject:
        return subject_of(self.body)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.body,
            "timestamp": self.timestamp,
            "_via": self.via,
            "_writes": self.writes,
            "_firstReceived": self.first_received,
            "_lastReceived": self.last_received,
        }


#: Fields a re-post never changes.
IMMUTABLE = frozenset({"id", "timestamp", "traceId", "environment", "createdAt", "projectId"})


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _deep_merge(old: Any, new: Any) -> Any:
    """lodash ``merge``: objects merged key by key, anything else replaced."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for key, value in new.items():
            out[key] = _deep_merge(old.get(key), value) if key in old else value
        return out
    return new


def overwrite_object(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The stored body after merging ``new`` into ``old`` (see the module docstring)."""
    out = dict(old)
    for key, value in new.items():
        if key in IMMUTABLE and key in old:
            continue
        if isinstance(value, dict) and not value:
            continue  # empty objects keep the old value
        if key == "metadata":
            out[key] = _deep_merge(old.get(key), value) if isinstance(old.get(key), dict) else value
            continue
        out[key] = value  # an explicit null overwrites
    return out


class ScoreStore:
    def __init__(self, *, keep_details: bool = True) -> None:
        #: Keep comment and metadata (off for very large runs: less memory).
        self.keep_details = keep_details
        self.scores: dict[tuple[str, str, str], StoredScore] = {}
        self.writes = 0
        self.overwrites = 0

    def upsert(self, body: dict[str, Any], timestamp: str | None, via: str, now: datetime | None = None) -> bool:
        """Store one accepted score; True when it is new (not an overwrite)."""
        received = (now or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
        moment = timestamp or received
        date = datetime.fromisoformat(moment).astimezone(UTC).date().isoformat()
        key = (str(body.get("id")), str(body.get("name")), date)
        kept = body if self.keep_details else {k: v for k, v in body.items() if k not in ("comment", "metadata")}
        self.writes += 1
        existing = self.scores.get(key)
        if existing is not None:
            existing.body = overwrite_object(existing.body, dict(kept))
            existing.via = via
            existing.writes += 1
            existing.last_received = received
            self.overwrites += 1
            return False
        self.scores[key] = StoredScore(dict(kept), moment, via, received, received)
        return True

    def latest_by_id(self) -> list[StoredScore]:
        """One row per score id, as Langfuse's reads answer (``LIMIT 1 BY id``, newest timestamp)."""
        best: dict[str, StoredScore] = {}
        for score in self.scores.values():
            ident = str(score.body.get("id"))
            held = best.get(ident)
            if held is None or _moment(score.timestamp) > _moment(held.timestamp):
                best[ident] = score
        return list(best.values())

    def clear(self) -> None:
        self.scores.clear()
        self.writes = 0
        self.overwrites = 0

    def by_subject(self) -> dict[tuple[Subject, str], list[StoredScore]]:
        out: dict[tuple[Subject, str], list[StoredScore]] = {}
        for score in self.scores.values():
            out.setdefault((score.subject, str(score.body.get("name"))), []).append(score)
        return out

    def summary(self) -> dict[str, Any]:
        """Counts: stored scores, writes, overwrites, per name, and every (subject, name) held twice or more."""
        grouped = self.by_subject()
        duplicates = [
            {
                "subject": list(subject),
                "name": name,
                "count": len(scores),
                "ids": sorted({str(s.body.get("id")) for s in scores}),
            }
            for (subject, name), scores in grouped.items()
            if len(scores) > 1
        ]
        by_name = Counter(str(s.body.get("name")) for s in self.scores.values())
        return {
            "stored": len(self.scores),
            "writes": self.writes,
            "overwrites": self.overwrites,
            "subjects": len({subject for subject, _ in grouped}),
            "by_name": dict(by_name),
            "duplicates": duplicates[:1000],
            "duplicate_count": len(duplicates),
        }

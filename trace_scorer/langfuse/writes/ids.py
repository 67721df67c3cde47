"""Deterministic score ids, ingestion event ids and timestamps: what makes a re-score an overwrite.

Langfuse upserts a score on (id, name, date of timestamp). The id is a uuid5 of the subject and the
score name only — never of the configuration or the metric version — so re-scoring a trace after a
configuration change overwrites its score instead of adding a second one. The timestamp is given by
the caller (the trace's start time, the run's first-seen start time) and normalised here to UTC
milliseconds, the precision Langfuse stores, so every generation sends the same value.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trace_scorer.langfuse.types import ScoreSubject

#: Namespace of every score id trace-scorer writes. Never change it: existing scores would be duplicated.
#: (= uuid5(NAMESPACE_URL, "https://github.com/trace-scorer/trace-scorer/score-id"))
SCORE_ID_NAMESPACE = uuid.UUID("69bbafe4-3fd5-5241-b264-7171d6a11a0d")

#: Separator that cannot occur in ids or score names (ASCII unit separator).
_SEP = "\x1f"


_NAMESPACE_BYTES = SCORE_ID_NAMESPACE.bytes


#: The RFC 4122 variant set on a hex digit holding the top four bits of byte 8 (``10xx``).
_VARIANT = {digit: format((int(digit, 16) & 0x3) | 0x8, "x") for digit in "0123456789abcdef"}


def _uuid5(name: str) -> str:
    """``str(uuid.uuid5(SCORE_ID_NAMESPACE, name))``, the same text in a quarter of the time (two per
    score posted; ``uuid.UUID`` checks and converts through an integer): SHA-1 of namespace and name,
    the first 16 bytes, version 5 and the RFC 4122 variant set, as ``uuid.uuid5`` does, on the digest's
    hex digits (digit 12 is byte 6's top four bits, the version; digit 16 byte 8's, the variant)."""
    text = hashlib.sha1(_NAMESPACE_BYTES + name.encode()).hexdigest()
    return f"{text[:8]}-{text[8:12]}-5{text[13:16]}-{_VARIANT[text[16]]}{text[17:20]}-{text[20:32]}"


def score_id(subject: ScoreSubject, name: str) -> str:
    """The score's id: uuid5 of (trace id, observation id, dataset run id, score name); a session's:
    of the session id alone (with a ``session`` part no other subject has), whatever trace it is
    posted on, so a session that grows keeps one score per name."""
    if subject.session_id is not None:
        session = ("score", "session", subject.session_id, name)
        return _uuid5(_SEP.join(session))
    parts = (
        "score",
        subject.trace_id or "",
        subject.observation_id or "",
        subject.dataset_run_id or "",
        name,
    )
    return _uuid5(_SEP.join(parts))


def ingestion_event_id(score_id: str, canonical_event: str) -> str:
    """Envelope id of a v3 ``score-create`` event: stable for the same content, new for new content.

    Langfuse drops an event whose envelope id it processed recently, so a resent batch (after a
    timeout) is not processed twice, while a changed value (a re-score) gets a new envelope id and
    is not mistaken for a duplicate. The score itself is still identified by ``score_id``.
    """
    digest = hashlib.sha256(canonical_event.encode()).hexdigest()
    return _uuid5(_SEP.join(("event", score_id, digest)))


def normalize_timestamp(value: datetime) -> datetime:
    """UTC, truncated to milliseconds (Langfuse's DateTime64(3)). Naive datetimes are an error."""
    if value.tzinfo is None:
        raise ValueError("a score timestamp must be timezone-aware")
    utc = value.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


#: Timestamps formatted and their texts: a trace's scores share one timestamp, and a batch holds a few
#: hundred traces' (an aware datetime hashes and compares as its instant: an equal one, the same text).
_formatted: dict[datetime, str] = {}
_FORMATTED_MAX = 4096


def format_timestamp(value: datetime) -> str:
    """ISO 8601 with milliseconds and ``Z``: ``2026-10-01T00:12:00.875Z``. Written field by field (the
    text ``strftime`` writes, a third of its time; ``strftime`` itself for years before 1000, which it
    does not pad), a recent one's text reused for an equal instant (the same UTC milliseconds)."""
    if value.tzinfo is not None:
        known = _formatted.get(value)
        if known is not None:
            return known
    utc = normalize_timestamp(value)
    if utc.year < 1000:
        text = utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    else:
        text = (
            f"{utc.year}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
            f".{utc.microsecond // 1000:03d}Z"
        )
    if len(_formatted) >= _FORMATTED_MAX:
        _formatted.clear()
    _formatted[value] = text
    return text

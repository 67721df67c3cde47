"""Scores are encoded once (langfuse/writes/scores.py): the bytes httpx would send, and event ids as before."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import ScoreSubject, ScoreToPost
from trace_scorer.langfuse.server.capabilities import ScorePosting
from trace_scorer.langfuse.types import DeliveryReport
from trace_scorer.langfuse.writes.ids import SCORE_ID_NAMESPACE, format_timestamp
from trace_scorer.langfuse.writes.scores import ScorePoster, ingestion_event, list_element, wire_json

METADATA: list[dict[str, Any] | None] = [
    None,
    {"scorer": "trace-scorer", "details": '{"f1": 0.5}', "n": 3, "ok": True, "none": None},
    {"text": "Réservé ✓ — 😀 \u2028", "del": "a\x7fb", "ctl": "tab\tnew\nline\x01"},
    {"kpi": "weighted_sum: 0.6·tool_call_accuracy + 0.4·rouge", "astral": "\U0010ffff\U00010000 \ufeff\uffff"},
    {"tiny": 1e-5, "huge": 1e16, "plain": 0.0001, "zero": -0.0, "big": 2**70, "nested": {"a": [1, "x"]}},
]


def _score(metadata: dict[str, Any] | None, value: float = 0.25) -> ScoreToPost:
    return ScoreToPost(
        subject=ScoreSubject.trace("t-1"),
        name="rouge",
        value=value,
        data_type="NUMERIC",
        timestamp=datetime(2026, 11, 26, 9, 0, 0, 123456, tzinfo=UTC),
        comment="é ok",
        metadata=metadata,
    )


@pytest.mark.parametrize("metadata", METADATA)
@pytest.mark.parametrize("value", [0.25, 1e-7, 0.0])
def test_a_score_is_sent_as_the_bytes_httpx_would_send(metadata: dict[str, Any] | None, value: float) -> None:
    for build in (ingestion_event, list_element):
        body = build(_score(metadata, value), "cfg-1")
        assert wire_json(body) == json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@pytest.mark.parametrize("metadata", METADATA)
def test_an_event_id_is_the_digest_of_the_standard_librarys_sorted_json(metadata: dict[str, Any] | None) -> None:
    score = _score(metadata)
    event = ingestion_event(score, None)
    canonical = json.dumps(
        {"timestamp": format_timestamp(score.timestamp), "body": event["body"]}, sort_keys=True, separators=(",", ":")
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    assert event["id"] == str(uuid.uuid5(SCORE_ID_NAMESPACE, "\x1f".join(("event", score.id, digest))))


def test_a_score_json_cannot_hold_is_refused_as_before() -> None:
    with pytest.raises(ValueError):
        wire_json({"value": float("nan")})


def test_score_and_event_ids_are_the_uuid5_of_the_standard_library() -> None:
    from trace_scorer.langfuse.writes import ids

    for name in ["", "score\x1ft-1\x1f\x1f\x1frouge", "Réservé ✓ 😀" * 9, "\x00\x7f"]:
        assert ids._uuid5(name) == str(uuid.uuid5(SCORE_ID_NAMESPACE, name))
    # Enough names for each of the 16 values of the digit the variant is set on, and of the version's.
    names = [f"score\x1ft-{n}\x1f\x1f\x1frouge" for n in range(400)]
    assert [ids._uuid5(name) for name in names] == [str(uuid.uuid5(SCORE_ID_NAMESPACE, name)) for name in names]
    session = ScoreSubject.session("chat-1")
    assert ids.score_id(session, "m") == str(
        uuid.uuid5(SCORE_ID_NAMESPACE, "\x1f".join(("score", "session", "chat-1", "m")))
    )


def test_plain_values_are_the_ones_orjson_writes_as_the_standard_library() -> None:
    from trace_scorer.data import jsonbytes

    assert jsonbytes.plain({"a": ["x", 1, 0.5, -0.0, True, None, {"b": 2**63 - 1}]})
    for odd in (
        {"a": 1e-5},
        {"a": 1e16},
        {"a": float("nan")},
        {"a": 2**63},
        {1: "x"},
        {"a": (1,)},
        {"a": datetime.now(UTC)},
    ):
        assert not jsonbytes.plain(odd)
    loop: dict[str, Any] = {}
    loop["self"] = loop
    assert not jsonbytes.plain(loop)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 10, 1, 0, 12, 0, 875_999, tzinfo=UTC),
        datetime(2026, 10, 1, 2, 12, 0, 5_000, tzinfo=timezone(timedelta(hours=2))),
        datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
        datetime(999, 1, 2, 3, 4, 5, 6_000, tzinfo=UTC),  # strftime does not pad a year before 1000
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_timestamps_read_as_strftime_writes_them(moment: datetime) -> None:
    utc = moment.astimezone(UTC)
    expected = utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
    assert format_timestamp(moment) == expected
    assert format_timestamp(moment) == expected  # the second time from the texts kept
    assert format_timestamp(utc) == expected  # the same instant in UTC


def test_a_naive_timestamp_is_refused_even_after_an_equal_looking_aware_one() -> None:
    format_timestamp(datetime(2026, 10, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 10, 1))


@pytest.mark.parametrize("posting", [ScorePosting.INGESTION, ScorePosting.SCORES_BATCH])
def test_prepared_scores_are_their_bodies_as_httpx_would_send_them(posting: ScorePosting) -> None:
    """``prepare`` hands on what it found of the metadata (plain or not): the same bodies and bytes."""
    poster = ScorePoster(transport=cast(Any, None), settings=LangfuseSettings(), posting=posting)
    build = ingestion_event if posting is ScorePosting.INGESTION else list_element
    scores = [
        dataclasses.replace(_score(metadata, value), subject=ScoreSubject.trace(f"t-{n}-{value}"))
        for n, metadata in enumerate(METADATA)
        for value in (0.25, 1e-7)
    ]
    prepared = poster.prepare(scores, DeliveryReport())
    assert [p.score for p in prepared] == scores
    for item in prepared:
        assert item.body == build(item.score, None)
        assert item.wire == json.dumps(item.body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()

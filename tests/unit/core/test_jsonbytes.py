"""The judge's JSON encoding: the bytes the SDK would send, and a digest input that never fails."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from trace_scorer import jsonbytes

BODY: dict[str, Any] = {
    "model": "judge-a",
    "messages": [{"role": "user", "content": 'Réservé ✓ — "quoted" \\ back\nslash \u2028 😀'}],
    "temperature": 0.7,
    "max_tokens": 500,
    "response_format": {"type": "json_schema", "json_schema": {"schema": {"enum": ["a", 1, None, True, 1.5e-7]}}},
}


def test_compact_is_the_json_the_openai_sdk_sends() -> None:
    # The SDK (and httpx) encode request JSON with these arguments, UTF-8.
    expected = json.dumps(BODY, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    assert json.loads(jsonbytes.compact(BODY) or b"") == BODY
    assert jsonbytes.compact(BODY) == expected.replace(b"1.5e-07", b"1.5e-7")  # the one spelling that differs


def test_compact_leaves_what_it_cannot_encode_exactly_to_the_sdk() -> None:
    assert jsonbytes.compact({"at": datetime(2026, 1, 1, tzinfo=UTC)}) is None
    assert jsonbytes.compact({"big": 2**70}) is None


def test_digest_input_ignores_key_order_and_takes_what_json_cannot() -> None:
    assert jsonbytes.sorted_digest_input({"b": 1, "a": [2]}) == jsonbytes.sorted_digest_input({"a": [2], "b": 1})
    assert jsonbytes.sorted_digest_input({1: {2, 3}, "x": None}) == b'{"1":"{2, 3}","x":null}'
    deep: Any = "leaf"
    for _ in range(400):  # deeper than orjson encodes: the standard library takes over
        deep = [deep]
    expected = json.dumps({"deep": deep}, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    assert jsonbytes.sorted_digest_input({"deep": deep}) == expected

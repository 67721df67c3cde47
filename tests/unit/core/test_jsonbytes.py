"""The judge's JSON encoding: the bytes the SDK would send, and a digest input that never fails."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from trace_scorer.data import jsonbytes

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


def test_loads_reads_what_the_standard_library_reads_with_the_same_values() -> None:
    texts = [
        json.dumps(BODY, ensure_ascii=False),
        '{"big": 12345678901234567890123, "low": -9223372036854775809, "u64": 18446744073709551615}',
        "[1,\n\t12345678901234567890123]",
        "-12345678901234567890123",
        "12345678901234567890123",
        '{"cost": 0.00016199999999999998, "id": "8d7edb98ed9691880000000000000030", "text": "1234567890123456789012"}',
        '{"f": 0.1, "e": 1.5e-7, "neg": -0.0, "dup": 1, "dup": 2}',
        "[NaN, Infinity, -Infinity, 1e400]",
        '"\\ud800 lone surrogate"',
    ]
    # Long texts (a page of rows) skip the digit count: a long integer deep inside is still found.
    padding = json.dumps([{"id": f"{n:032d}", "t": "2026-11-26T12:34:58.210Z", "c": 0.1 + n} for n in range(200)])
    texts += [f'{{"rows": {padding}, "big": 12345678901234567890123}}', f'{{"rows": {padding}, "ok": 1234}}']
    for text in texts:
        for given in (text, text.encode("utf-8")):
            expected, got = json.loads(given), jsonbytes.loads(given)
            assert repr(got) == repr(expected)  # repr: NaN equal to itself, an int not a float
    assert jsonbytes.loads('{"a": 1}'.encode("utf-16")) == {"a": 1}
    assert jsonbytes.loads('\ufeff{"bom": 1}'.encode()) == {"bom": 1}  # as bytes; as text both refuse it


def test_loads_refuses_what_the_standard_library_refuses() -> None:
    for text in ("", "{", "not json", "[1,]", b"\xff", '\ufeff{"bom": 1}'):
        try:
            json.loads(text)
        except ValueError as error:
            expected: type[Exception] = type(error)
        try:
            jsonbytes.loads(text)
        except ValueError as error:
            assert type(error) is expected
        else:
            raise AssertionError(f"{text!r} was read")

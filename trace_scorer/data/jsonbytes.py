"""JSON on the hot paths: orjson, with the standard library's as the fallback where they would differ.

Decoding (:func:`loads`): Langfuse's answers and the rows' JSON-text fields, 15 % of a deterministic
trace's CPU with the standard library; orjson is ~3× faster and gives the same values but for a few
inputs, which go to the standard library instead (see :func:`loads`).

Encoding: every judge call encodes its request twice: the cache key (``judge/cache.py``) and the body sent
(``judge/chat.py``). The standard library took ~30 µs for a 4 KB judge request, orjson ~2.5 µs, and
orjson's compact UTF-8 output is what the ``openai`` SDK's own encoder sends (``ensure_ascii`` off, no
spaces), byte for byte but for a float exponent's spelling (``1e-7`` for ``1e-07``: the same number). What
orjson refuses (integers past 64 bits, nesting deeper than 254) falls back to the standard library, so no
input that encoded before fails now. The answer is decoded once, by orjson too (:func:`loads`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _number_shape() -> bytes:
    """A ``bytes.translate`` table: digits to ``0``, what may precede a JSON number to ``|``, the rest
    to ``x`` (a translation and a substring search run in C, ~1 ns a byte; a regular expression took
    ten times longer than orjson's decoding)."""
    table = bytearray(b"x" * 256)
    for byte in b"0123456789":
        table[byte] = ord("0")
    for byte in b":,[- \t\r\n":
        table[byte] = ord("|")
    return bytes(table)


_NUMBER_SHAPE = _number_shape()
#: An integer of 19 digits or more: orjson reads one past 64 bits as a float.
_LONG_INTEGER = b"|" + b"0" * 19
#: Texts of this many bytes and more skip the digit count (see :func:`loads`).
_COUNT_BELOW = 4096


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: the same value, ~4× faster. orjson reads an integer past 64 bits as a float
    (the standard library: exactly), so a text with a run of 19 digits where a number may start goes to
    the standard library (a digit run inside a string too: slower, the same value); so does what orjson
    refuses and the standard library reads (NaN and Infinity, lone surrogates, numbers past a double's
    range, a BOM or UTF-16 in bytes), and what both refuse raises the standard library's ``ValueError``."""
    try:
        raw = text.encode() if isinstance(text, str) else text
    except UnicodeEncodeError:  # a lone surrogate
        return json.loads(text)
    shape = raw.translate(_NUMBER_SHAPE)
    # Counting digits first spares a short text the substring search (which cost more than its
    # decoding); a long one (a page of rows) has its 19 digits anyway, and counting took 4× the search.
    if (len(shape) < _COUNT_BELOW and shape.count(b"0") < 19) or (
        _LONG_INTEGER not in shape and not shape.startswith(_LONG_INTEGER[1:])
    ):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


#: Floats both libraries spell the same way (plain decimals; outside, ``1e-05`` against ``1e-5``).
_PLAIN_FLOATS = (1e-4, 1e16)
_INT64 = (-(2**63), 2**63)


def plain(value: Any) -> bool:
    """True when orjson writes ``value`` as the standard library's ``json.dumps`` does (compact, no ASCII
    escaping), so either may encode it: dicts with string keys and lists of strings, booleans, None,
    64-bit integers and finite floats written without an exponent. Exact types only (a subclass, a
    tuple, anything ``default=`` would convert: False), and too deep to walk: False."""
    try:
        return _plain(value)
    except RecursionError:
        return False


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            leaf = type(item)  # leaves checked here, without a call each
            if leaf is str or item is None or leaf is bool:
                continue
            if leaf is float:
                if not (item == 0.0 or _PLAIN_FLOATS[0] <= abs(item) < _PLAIN_FLOATS[1]):
                    return False
            elif leaf is int:
                if not _INT64[0] <= item < _INT64[1]:
                    return False
            elif not _plain(item):
                return False
        return True
    if kind is str or value is None or kind is bool:
        return True
    if kind is list:
        return all(type(item) is str or _plain(item) for item in value)
    if kind is float:
        return bool(value == 0.0 or _PLAIN_FLOATS[0] <= abs(value) < _PLAIN_FLOATS[1])
    if kind is int:
        return bool(_INT64[0] <= value < _INT64[1])
    return False


def compact(value: Any) -> bytes | None:
    """``value`` as compact UTF-8 JSON (the SDK's request encoding), or None when orjson cannot encode it
    exactly (a datetime, a model, a dataclass: the caller then hands the value to the SDK to encode as
    before). orjson writes NaN as null where the SDK raises: a judge request's only floats are its
    temperature, validated to 0–2 by the settings."""
    try:
        return orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME)
    except (orjson.JSONEncodeError, TypeError):
        return None


def sorted_digest_input(value: Any) -> bytes:
    """``value`` as UTF-8 JSON with sorted keys (keys that are not strings as strings, values JSON has no
    type for as orjson writes them or else as ``str``): the stable input of a digest, the same value giving
    the same bytes; not meant to be read back."""
    try:
        return orjson.dumps(value, default=str, option=_SORTED)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()

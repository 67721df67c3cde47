"""JSON on the judge's per-call path: orjson, with the standard library's as the fallback.

Every judge call encodes its request twice: the cache key (``judge/cache.py``) and the body sent
(``judge/chat.py``). The standard library took ~30 µs for a 4 KB judge request, orjson ~2.5 µs, and
orjson's compact UTF-8 output is what the ``openai`` SDK's own encoder sends (``ensure_ascii`` off, no
spaces), byte for byte but for a float exponent's spelling (``1e-7`` for ``1e-07``: the same number). What
orjson refuses (integers past 64 bits, nesting deeper than 254) falls back to the standard library, so no
input that encoded before fails now. The answer is decoded once, by orjson too (:func:`loads`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


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


def loads(content: bytes, fallback: Callable[[], Any]) -> Any:
    """``content`` (UTF-8 JSON) decoded by orjson; what orjson refuses (NaN, Infinity, another encoding)
    is ``fallback()``'s, the standard library's decoding, which decodes it or raises as before. One
    difference: orjson reads an integer past 64 bits as a float (a judge's answer has none but its token
    counts, which never come near)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return fallback()

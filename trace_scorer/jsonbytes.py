"""JSON on the hot paths: orjson, with the standard library's as the fallback where they would differ.

Decoding (:func:`loads`): Langfuse's answers and the rows' JSON-text fields, 15 % of a deterministic
trace's CPU with the standard library; orjson is ~3× faster and gives the same values but for a few
inputs, which go to the standard library instead (see :func:`loads`).

Encoding: every judge call encodes its request twice: the cache key (``judge/cache.py``) and the body sent
(``judge/chat.py``). The standard library took ~30 µs for a 4 KB judge request, orjson ~2.5 µs, and
orjson's compact UTF-8 output is what the ``openai`` SDK's own encoder sends (``ensure_ascii`` off, no
spaces), byte for byte but for a float exponent's spelling (``1e-7`` for ``1e-07``: the same number). What
orjson refuses (integers past 64 bits, nesting deeper than 254) falls back to the standard library, so no
input that encoded before fails now.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
#: A run of 19 digits: an integer orjson may read as a float (past 64 bits), or a long mantissa.
_LONG_NUMBER = re.compile(r"[0-9]{19}")
_LONG_NUMBER_BYTES = re.compile(rb"[0-9]{19}")


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, the same value, faster. orjson reads an integer past 64 bits as a float
    (the standard library: exactly), so text with a 19-digit run anywhere goes to the standard library;
    what orjson refuses and the standard library reads (NaN and Infinity, lone surrogates, numbers past a
    double's range, a BOM, UTF-16) goes to it too, and what both refuse raises its ``ValueError``."""
    pattern = _LONG_NUMBER_BYTES if isinstance(text, bytes) else _LONG_NUMBER
    if pattern.search(text) is None:  # type: ignore[arg-type]  # the pattern matches the text's type
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


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

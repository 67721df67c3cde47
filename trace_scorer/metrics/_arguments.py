"""Tool-call argument equality (docs/metrics.md "Argument equality"), shared by both tool metrics.

Arguments are compared as JSON values: objects key-order-free and recursively, arrays in order, numbers
numerically (``1 == 1.0``), booleans only with booleans (``true != 1``), strings exactly. Options:
``coerce_scalars`` compares scalars by their string form (``"2" == 2``) and ``casefold_strings``
compares strings casefolded.

How: every value is turned once into a *canonical form* on which Python's own ``==`` is exactly the
rule above (dicts are already order-free, lists ordered, ``1 == 1.0``), so comparing two calls is a
C-speed ``==`` instead of a recursive walk per pair. The canonical form differs from the JSON value
only where Python's ``==`` disagrees with JSON's: booleans become sentinels (Python has
``True == 1``), NaN becomes a sentinel (Python has ``nan != nan``; two NaNs are the same token), and,
under the options, strings are casefolded and scalars become their string form. Hand-written on
purpose: the rule set is ours (docs/metrics.md), and a canonical form computed once per call is what keeps the
matching hot path fast; a generic deep-diff library would walk both values again for every pair.
Where a pair is compared only once (each name once on each side, strict mode, no option: most samples),
:func:`plain_equal` walks the two values side by side instead, building neither form.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trace_scorer.metrics.base import MetricOptions
from trace_scorer.sample import ToolCall


class ArgumentOptions(MetricOptions):
    """The argument-equality options both tool metrics accept."""

    #: Compare scalars by their JSON string form: ``"2" == 2``, ``"2.0" == 2``, ``"true" == true``.
    coerce_scalars: bool = False
    #: Compare strings casefolded: ``"Paris" == "PARIS"``.
    casefold_strings: bool = False


class _Sentinel(enum.Enum):
    """Canonical stand-ins for JSON tokens whose Python ``==`` is wrong for JSON (identity equality)."""

    TRUE = "true"
    FALSE = "false"
    NAN = "nan"


#: A JSON number as JSON writes it (so "007" or " 2" are strings, not numbers, under coerce_scalars).
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

Canonicalizer = Callable[[Any], Any]

_ABSENT = object()


def _number_text(value: int | float) -> str:
    """One string per numeric value: 2, 2.0 and "2.0" all give "2"."""
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value) and value.is_integer():
        return str(int(value))
    return repr(value)


def _canon_plain(value: Any) -> Any:
    # Strings and ints are their own canonical form; testing for them inline in the comprehensions
    # saves a call per scalar, which is most of the cost of this hot path (measured: bench_metrics).
    t = type(value)
    if t is str or t is int or value is None:
        return value
    if t is dict:
        return {k: v if (tv := type(v)) is str or tv is int else _canon_plain(v) for k, v in value.items()}
    if t is bool:
        return _Sentinel.TRUE if value else _Sentinel.FALSE
    if t is float:
        return _Sentinel.NAN if value != value else value
    if t is list or t is tuple:
        return [v if (tv := type(v)) is str or tv is int else _canon_plain(v) for v in value]
    return value


def _is_canonical(value: Any) -> bool:
    """Whether ``value`` is its own canonical form under :func:`_canon_plain`: no boolean, no NaN, no tuple
    anywhere in it (most arguments). Walking without building is cheaper than the copy it spares
    (bench_offline: 15 → 10 µs a sample)."""
    t = type(value)
    if t is dict or t is list:
        for v in value.values() if t is dict else value:
            tv = type(v)
            if tv is str or tv is int or v is None:
                continue
            if tv is dict or tv is list:
                if not _is_canonical(v):
                    return False
            elif tv is not float or v != v:
                return False
        return True
    return t is str or t is int or value is None or (t is float and value == value)


def _canon_plain_arguments(value: Any) -> Any:
    """:func:`_canon_plain`, returning ``value`` itself when nothing in it changes (never mutated after)."""
    return value if _is_canonical(value) else _canon_plain(value)


def plain_equal(a: Any, b: Any) -> bool:
    """``_canon_plain(a) == _canon_plain(b)``, without building either form: one walk of both values
    side by side that stops at the first difference. For one comparison of a pair (each name once on
    each side, the usual case) this halves the cost of two canonical forms (bench_offline); where the
    types differ it falls back to the canonical forms, so it is that rule by construction."""
    t = type(a)
    if t is not type(b):
        return bool(_canon_plain(a) == _canon_plain(b))
    if t is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            w = b.get(k, _ABSENT)
            if w is _ABSENT:
                return False
            tv = type(v)
            if (tv is str or tv is int) and type(w) is tv:  # inline: most values are strings and ints
                if v != w:
                    return False
            elif not plain_equal(v, w):
                return False
        return True
    if t is list or t is tuple:
        if len(a) != len(b):
            return False
        for v, w in zip(a, b, strict=True):
            tv = type(v)
            if (tv is str or tv is int) and type(w) is tv:
                if v != w:
                    return False
            elif not plain_equal(v, w):
                return False
        return True
    if t is float:
        return bool(a == b or (a != a and b != b))  # NaN is one token
    return bool(a == b)


def _canon_casefold(value: Any) -> Any:
    t = type(value)
    if t is str:
        return value.casefold()
    if t is int or value is None:
        return value
    if t is dict:
        return {k: _canon_casefold(v) for k, v in value.items()}
    if t is bool:
        return _Sentinel.TRUE if value else _Sentinel.FALSE
    if t is float:
        return _Sentinel.NAN if value != value else value
    if t is list or t is tuple:
        return [_canon_casefold(v) for v in value]
    return value


def _coerced_string(text: str) -> str:
    if _JSON_NUMBER.fullmatch(text):
        number: int | float = float(text) if any(c in text for c in ".eE") else int(text)
        return _number_text(number)
    return text


def _make_coercing(casefold: bool) -> Canonicalizer:
    def canon(value: Any) -> Any:
        t = type(value)
        if t is str:
            return _coerced_string(value.casefold() if casefold else value)
        if t is dict:
            return {k: canon(v) for k, v in value.items()}
        if t is list or t is tuple:
            return [canon(v) for v in value]
        if t is bool:
            return "true" if value else "false"
        if value is None:
            return "null"
        if t is int or t is float:
            return _number_text(value)
        return value

    return canon


def canonicalizer(*, coerce_scalars: bool = False, casefold_strings: bool = False) -> Canonicalizer:
    """The function mapping a JSON value to the form on which ``==`` is argument equality."""
    if coerce_scalars:
        return _make_coercing(casefold_strings)
    return _canon_casefold if casefold_strings else _canon_plain_arguments


def values_equal(a: Any, b: Any, *, coerce_scalars: bool = False, casefold_strings: bool = False) -> bool:
    """Whether two JSON values are equal under the argument-equality rule; metrics compare
    :func:`canonicalizer` keys. For tests and benches only."""
    canon = canonicalizer(coerce_scalars=coerce_scalars, casefold_strings=casefold_strings)
    return bool(canon(a) == canon(b))


@dataclass(frozen=True, slots=True)
class NormalizedCall:
    """A tool call with its arguments in canonical form (computed once per call, compared many times)."""

    name: str
    arguments: dict[str, Any]


def normalize_calls(calls: list[ToolCall], canon: Canonicalizer) -> list[NormalizedCall]:
    return [NormalizedCall(call.name, canon(call.arguments)) for call in calls]


_MISSING = object()


def argument_share(actual: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """Share of the reference's arguments that ``actual`` has with an equal value (1.0 if none).

    Both mappings must be canonical (see :func:`canonicalizer`).
    """
    if not reference:
        return 1.0
    hits = 0
    for key, value in reference.items():
        if actual.get(key, _MISSING) == value:
            hits += 1
    return hits / len(reference)


def mismatched_keys(actual: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """Reference argument names whose value ``actual`` lacks or differs on; then the extra names."""
    differing = [k for k, v in reference.items() if actual.get(k, _MISSING) != v]
    extra = [k for k in actual if k not in reference]
    return differing + extra

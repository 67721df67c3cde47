"""The ``expression`` KPI formula: a small arithmetic language over score names, never ``eval``.

Grammar: numbers, score names, ``+ - * /`` (also ``× ÷ −``), parentheses, one comparison
(``>= > <= < == !=``, giving 1 or 0), and the functions ``min``, ``max``, ``avg`` (one argument or more;
with one, each is that argument). Nesting deeper than ``MAX_NESTING`` levels is a configuration error.
Names that are not identifiers (Langfuse allows ``. ( ) -`` and spaces) are written in backquotes: ``` `tca-v2` ```.

Parsed with lark (LALR) into a tree of closures once at start-up; evaluating is plain arithmetic. The
parser lives in ``_compiler.py``, imported by the first expression compiled: lark and its grammar cost
0.1 s of start-up that a target without an ``expression`` KPI (most of them) does not pay.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Evaluator = Callable[[Mapping[str, float]], float]

_UNICODE_OPERATORS = {"×": "*", "÷": "/", "−": "-", "≥": ">=", "≤": "<=", "≠": "!="}
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}


def _avg(values: list[float]) -> float:
    return sum(values) / len(values)


#: Each takes the list of its arguments' values, so that ``min(x)`` and ``max(x)`` are ``x``, as ``avg(x)`` is.
_FUNCTIONS: dict[str, Callable[[list[float]], float]] = {"min": min, "max": max, "avg": _avg}

#: Deepest nesting of parentheses, calls and unary signs (chains like ``a + b + c`` count once): the tree is
#: compiled and evaluated recursively, and 2,000 characters could otherwise nest ~1,000 levels.
MAX_NESTING = 100

_BINARY: dict[str, Callable[[float, float], float]] = {"+": operator.add, "-": operator.sub, "*": operator.mul}


class ExpressionError(ValueError):
    """The expression cannot be parsed (raised at start-up, so the message must point at the spot)."""


class DivisionByZero(ArithmeticError):
    """A division by zero while evaluating: the KPI is not computed for that sample (with the reason)."""


def _divide(left: float, right: float) -> float:
    if right == 0:
        raise DivisionByZero("division by zero")
    return left / right


@dataclass(frozen=True)
class Expression:
    """A compiled expression: the score names it reads and a function of their values."""

    source: str
    names: tuple[str, ...]
    evaluate: Evaluator


def compile_expression(source: str) -> Expression:
    """Parse ``source``; raise :class:`ExpressionError` naming the position of the problem."""
    from trace_scorer.kpi._compiler import compile_tree

    text = source
    for symbol, ascii_operator in _UNICODE_OPERATORS.items():
        text = text.replace(symbol, ascii_operator)
    names, evaluate = compile_tree(source, text)
    return Expression(source=source, names=names, evaluate=evaluate)

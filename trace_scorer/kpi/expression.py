"""The ``expression`` KPI formula: a small arithmetic language over score names, never ``eval``.

Grammar: numbers, score names, ``+ - * /`` (also ``× ÷ −``), parentheses, one comparison
(``>= > <= < == !=``, giving 1 or 0), and the functions ``min``, ``max``, ``avg``. Names that are not
identifiers (Langfuse allows ``. ( ) -`` and spaces) are written in backquotes: ``` `tca-v2` ```.

Parsed with lark (LALR) into a tree of closures once at start-up; evaluating is plain arithmetic.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

Evaluator = Callable[[Mapping[str, float]], float]

_GRAMMAR = r"""
?start: comparison
?comparison: sum
    | sum COMP_OP sum        -> compare
?sum: product
    | sum "+" product        -> add
    | sum "-" product        -> sub
?product: unary
    | product "*" unary      -> mul
    | product "/" unary      -> div
?unary: atom
    | "-" unary              -> neg
    | "+" unary
?atom: NUMBER                -> number
    | NAME "(" [args] ")"    -> call
    | NAME                   -> name
    | QUOTED                 -> quoted_name
    | "(" comparison ")"
args: comparison ("," comparison)*

COMP_OP: ">=" | "<=" | "==" | "!=" | ">" | "<"
NAME: /[A-Za-z_][A-Za-z0-9_]*/
QUOTED: /`[^`]+`/
NUMBER: /\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?/
%import common.WS
%ignore WS
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)

_UNICODE_OPERATORS = {"×": "*", "÷": "/", "−": "-", "≥": ">=", "≤": "<=", "≠": "!="}
_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}


def _avg(*values: float) -> float:
    return sum(values) / len(values)


_FUNCTIONS: dict[str, Callable[..., float]] = {"min": min, "max": max, "avg": _avg}


class ExpressionError(ValueError):
    """The expression cannot be parsed (raised at start-up, so the message must point at the spot)."""


class DivisionByZero(ArithmeticError):
    """A division by zero while evaluating: the KPI is not computed for that sample (with the reason)."""


def _divide(left: float, right: float) -> float:
    if right == 0:
        raise DivisionByZero("division by zero")
    return left / right


@v_args(inline=True)
class _Compiler(Transformer[Token, Evaluator]):
    """Turns the parse tree into closures and collects the names it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def number(self, token: Token) -> Evaluator:
        value = float(token)
        return lambda _values: value

    def _variable(self, name: str) -> Evaluator:
        if name not in self.names:
            self.names.append(name)
        return lambda values: values[name]

    def name(self, token: Token) -> Evaluator:
        return self._variable(str(token))

    def quoted_name(self, token: Token) -> Evaluator:
        return self._variable(str(token)[1:-1])

    def call(self, token: Token, args: list[Evaluator] | None = None) -> Evaluator:
        function = _FUNCTIONS.get(str(token))
        if function is None:
            raise ExpressionError(f"unknown function {str(token)!r}: use min, max or avg")
        if not args:
            raise ExpressionError(f"{token}() needs at least one argument")
        arguments = list(args)
        return lambda values: float(function(*(arg(values) for arg in arguments)))

    def args(self, *items: Evaluator) -> list[Evaluator]:
        return list(items)

    def _binary(self, op: Callable[[float, float], float], left: Evaluator, right: Evaluator) -> Evaluator:
        return lambda values: op(left(values), right(values))

    def add(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return self._binary(operator.add, left, right)

    def sub(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return self._binary(operator.sub, left, right)

    def mul(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return self._binary(operator.mul, left, right)

    def div(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return self._binary(_divide, left, right)

    def neg(self, operand: Evaluator) -> Evaluator:
        return lambda values: -operand(values)

    def compare(self, left: Evaluator, op: Token, right: Evaluator) -> Evaluator:
        test = _COMPARISONS[str(op)]
        return lambda values: 1.0 if test(left(values), right(values)) else 0.0


@dataclass(frozen=True)
class Expression:
    """A compiled expression: the score names it reads and a function of their values."""

    source: str
    names: tuple[str, ...]
    evaluate: Evaluator


def compile_expression(source: str) -> Expression:
    """Parse ``source``; raise :class:`ExpressionError` naming the position of the problem."""
    text = source
    for symbol, ascii_operator in _UNICODE_OPERATORS.items():
        text = text.replace(symbol, ascii_operator)
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise ExpressionError(f"cannot parse {source!r} at column {exc.column}") from None
    except LarkError as exc:
        raise ExpressionError(f"cannot parse: {exc}") from None
    compiler = _Compiler()
    try:
        evaluate = compiler.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ExpressionError):
            raise exc.orig_exc from None
        raise
    if isinstance(evaluate, Token):  # a bare token cannot occur with this grammar; keep mypy honest
        raise ExpressionError("empty expression")
    return Expression(source=source, names=tuple(compiler.names), evaluate=evaluate)

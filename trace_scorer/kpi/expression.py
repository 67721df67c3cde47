"""The ``expression`` KPI formula: a small arithmetic language over score names, never ``eval``.

Grammar: numbers, score names, ``+ - * /`` (also ``× ÷ −``), parentheses, one comparison
(``>= > <= < == !=``, giving 1 or 0), and the functions ``min``, ``max``, ``avg`` (one argument or more;
with one, each is that argument). Nesting deeper than ``MAX_NESTING`` levels is a configuration error.
Names that are not identifiers (Langfuse allows ``. ( ) -`` and spaces) are written in backquotes: ``` `tca-v2` ```.

Parsed with lark (LALR) into a tree of closures once at start-up; evaluating is plain arithmetic.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

Evaluator = Callable[[Mapping[str, float]], float]

_GRAMMAR = r"""
?start: comparison
?comparison: sum
    | sum COMP_OP sum        -> compare
?sum: product (SUM_OP product)*
?product: unary (PRODUCT_OP unary)*
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
SUM_OP: "+" | "-"
PRODUCT_OP: "*" | "/"
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
        return lambda values: float(function([arg(values) for arg in arguments]))

    def args(self, *items: Evaluator) -> list[Evaluator]:
        return list(items)

    def _chain(self, first: Evaluator, *rest: Token | Evaluator) -> Evaluator:
        """``a op b op c …`` (left to right) as one loop, however long the chain."""
        steps: list[tuple[Callable[[float, float], float], Evaluator]] = []
        for index in range(0, len(rest), 2):
            symbol, operand = rest[index], rest[index + 1]
            assert isinstance(symbol, Token) and not isinstance(operand, Token)
            steps.append((_divide if symbol == "/" else _BINARY[str(symbol)], operand))

        def evaluate(values: Mapping[str, float]) -> float:
            result = first(values)
            for op, operand in steps:
                result = op(result, operand(values))
            return result

        return evaluate

    def sum(self, first: Evaluator, *rest: Token | Evaluator) -> Evaluator:
        return self._chain(first, *rest)

    def product(self, first: Evaluator, *rest: Token | Evaluator) -> Evaluator:
        return self._chain(first, *rest)

    def neg(self, operand: Evaluator) -> Evaluator:
        return lambda values: -operand(values)

    def compare(self, left: Evaluator, op: Token, right: Evaluator) -> Evaluator:
        test = _COMPARISONS[str(op)]
        return lambda values: 1.0 if test(left(values), right(values)) else 0.0


def _depth(tree: Tree[Token]) -> int:
    """The depth of the parse tree, counted without recursion."""
    deepest = 0
    stack: list[tuple[Tree[Token] | Token, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Tree):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in node.children)
    return deepest


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
    if _depth(tree) > MAX_NESTING:
        raise ExpressionError(
            f"the expression is nested more than {MAX_NESTING} levels deep (parentheses, calls, signs): simplify it"
        )
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

"""The parser and compiler of ``expression`` KPI formulas (the language: ``expression.py``), imported by
the first expression compiled: building the LALR parser and importing lark are start-up time that only
targets with such a KPI pay."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

from trace_scorer.kpi.expression import (
    _BINARY,
    _COMPARISONS,
    _FUNCTIONS,
    MAX_NESTING,
    Evaluator,
    ExpressionError,
    _divide,
)

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


def compile_tree(source: str, text: str) -> tuple[tuple[str, ...], Evaluator]:
    """Parse ``text`` (``source`` with ASCII operators) into the names it reads and its evaluator; raise
    :class:`ExpressionError` naming the position of the problem."""
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
    return tuple(compiler.names), evaluate

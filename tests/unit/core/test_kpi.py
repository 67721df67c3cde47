"""KPI formulas and the expression language (parsed safely, never eval)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pytest
from pydantic import TypeAdapter, ValidationError

from trace_scorer.config.targets import KpiEntry, _formula_entries
from trace_scorer.kpi.base import FormulaOptions, KpiFormula
from trace_scorer.kpi.expression import DivisionByZero, ExpressionError, compile_expression
from trace_scorer.kpi.formulas import FORMULAS, WeightedSumOptions, build_kpi, installed_formulas
from trace_scorer.metrics.base import Outcome, Score, Skipped

ENTRY: TypeAdapter[Any] = TypeAdapter(KpiEntry)
RESULTS: dict[str, Outcome] = {
    "tool_call_accuracy": Score(0.9),
    "rouge": Score(0.4),
    "bleu": Score(0.2),
    "topic_precision": Score(0.5),
    "topic_recall": Score(1.0),
    "missing": Skipped("expected absent"),
}


def value(entry: dict[str, Any], metric_names: tuple[str, ...] = ("tool_call_accuracy", "rouge", "bleu")) -> Outcome:
    return build_kpi(ENTRY.validate_python({"name": "k", **entry}), metric_names).evaluate(RESULTS)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"formula": "weighted_sum", "weights": {"tool_call_accuracy": 0.6, "rouge": 0.4}}, 0.7),
        ({"formula": "weighted_sum", "weights": {"tool_call_accuracy": 3, "rouge": 1}}, 3.1),
        ({"formula": "weighted_sum", "weights": {"tool_call_accuracy": 3, "rouge": 1}, "normalize": True}, 0.775),
        ({"formula": "average"}, 0.5),
        ({"formula": "average", "metrics": ["rouge", "bleu"]}, 0.3),
        ({"formula": "min"}, 0.2),
        ({"formula": "max", "metrics": ["rouge", "bleu"]}, 0.4),
        ({"formula": "threshold", "metric": "tool_call_accuracy", "threshold": 0.9}, 1.0),
        ({"formula": "threshold", "metric": "tool_call_accuracy", "threshold": 0.9, "direction": ">"}, 0.0),
        ({"formula": "threshold", "metric": "rouge", "threshold": 0.5, "direction": "<"}, 1.0),
        ({"formula": "threshold", "metric": "rouge", "threshold": 0.4, "direction": "<="}, 1.0),
        ({"formula": "f1", "precision": "topic_precision", "recall": "topic_recall"}, 2 / 3),
        ({"formula": "expression", "expression": "0.5 * tool_call_accuracy + 0.5 * min(rouge, bleu)"}, 0.55),
    ],
)
def test_formulas(entry: dict[str, Any], expected: float) -> None:
    outcome = value(entry)
    assert isinstance(outcome, Score)
    assert outcome.value == pytest.approx(expected)


def test_f1_of_zeros_is_zero() -> None:
    kpi = build_kpi(ENTRY.validate_python({"name": "k", "formula": "f1", "precision": "p", "recall": "r"}), ())
    outcome = kpi.evaluate({"p": Score(0.0), "r": Score(0.0)})
    assert isinstance(outcome, Score) and outcome.value == 0.0


def test_missing_input_gives_no_kpi_with_reason() -> None:
    outcome = value({"formula": "min", "metrics": ["rouge", "missing"]})
    assert outcome == Skipped("k: input 'missing' has no value (expected absent)")
    assert value({"formula": "average", "metrics": ["rouge", "never_computed"]}) == Skipped(
        "k: input 'never_computed' has no value (not computed)"
    )


def test_comment_says_how_it_was_computed() -> None:
    outcome = value({"formula": "weighted_sum", "weights": {"tool_call_accuracy": 0.6, "rouge": 0.4}})
    assert isinstance(outcome, Score)
    assert outcome.comment == "weighted_sum: 0.6·tool_call_accuracy + 0.4·rouge"
    assert outcome.details == {"inputs": {"tool_call_accuracy": 0.9, "rouge": 0.4}}


@pytest.mark.parametrize(
    ("source", "values", "expected"),
    [
        ("1 + 2 * 3", {}, 7.0),
        ("(1 + 2) * 3", {}, 9.0),
        ("-a + +b", {"a": 1, "b": 3}, 2.0),
        ("a - b - c", {"a": 10, "b": 3, "c": 2}, 5.0),  # left-associative
        ("a / b / c", {"a": 8, "b": 2, "c": 2}, 2.0),
        ("2 × 3 ÷ 4 − 1", {}, 0.5),
        ("a >= 0.5", {"a": 0.5}, 1.0),
        ("a > 0.5", {"a": 0.5}, 0.0),
        ("a ≤ b", {"a": 1, "b": 2}, 1.0),
        ("a == b", {"a": 1, "b": 1.0}, 1.0),
        ("a != b", {"a": 1, "b": 1}, 0.0),
        ("(a >= 0.5) * 0.5 + (b >= 0.5) * 0.5", {"a": 0.9, "b": 0.1}, 0.5),
        ("avg(a, b, 1)", {"a": 0, "b": 0.5}, 0.5),
        ("max(min(a, b), 0.25)", {"a": 0.1, "b": 0.2}, 0.25),
        ("`tca-v2` + `rouge (en)`", {"tca-v2": 0.25, "rouge (en)": 0.5}, 0.75),
        ("1e-1 + .5", {}, 0.6),
    ],
)
def test_expression_arithmetic(source: str, values: dict[str, float], expected: float) -> None:
    assert compile_expression(source).evaluate(values) == pytest.approx(expected)


def test_expression_names_in_order_of_appearance() -> None:
    assert compile_expression("b + a * b + `c.d`").names == ("b", "a", "c.d")


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('touch /tmp/pwned')",
        "rouge.__class__",
        "open('/etc/passwd')",
        "eval('1')",
        "[1, 2]",
        "lambda: 1",
        "a if b else c",
        "a ** 2",
        "a; b",
        "1 < 2 < 3",
        "min()",
        "a +",
        "",
        "'text'",
    ],
)
def test_expression_refuses_anything_else(source: str) -> None:
    with pytest.raises(ExpressionError):
        compile_expression(source)


def test_expression_division_by_zero_is_reported() -> None:
    expression = compile_expression("a / (b - 1)")
    with pytest.raises(DivisionByZero):
        expression.evaluate({"a": 1, "b": 1})
    assert value({"formula": "expression", "expression": "rouge / (bleu - 0.2)"}) == Skipped(
        "k: division by zero in rouge / (bleu - 0.2)"
    )


def test_expression_error_points_at_the_column() -> None:
    with pytest.raises(ExpressionError, match=r"at column 7"):
        compile_expression("rouge ) + 1")


def test_deeply_nested_expression_is_fine() -> None:
    source = "(" * 200 + "a" + ")" * 200
    assert compile_expression(source).evaluate({"a": 0.5}) == 0.5


def test_registry_lists_each_formula_once_in_the_documented_order() -> None:
    assert list(FORMULAS) == ["average", "min", "max", "weighted_sum", "threshold", "f1", "expression"]
    assert all(cls.key == key for key, cls in FORMULAS.items())


def test_entry_is_validated_by_its_formula_options() -> None:
    entry = ENTRY.validate_python({"name": "k", "formula": "weighted_sum", "weights": {"a": 1}})
    assert isinstance(entry, KpiEntry) and isinstance(entry, WeightedSumOptions)
    assert entry.options == WeightedSumOptions(weights={"a": 1.0})
    # The dump (hashed into the configuration hash) is name, formula, then the options with their defaults.
    assert entry.model_dump_json() == '{"name":"k","formula":"weighted_sum","weights":{"a":1.0},"normalize":false}'


class _ScaleOptions(FormulaOptions):
    metric: str
    factor: float = 2.0


class _ScaleFormula(KpiFormula[_ScaleOptions]):
    key: ClassVar[str] = "scale"
    Options: ClassVar[type[_ScaleOptions]] = _ScaleOptions

    def inputs(self) -> tuple[str, ...]:
        return (self.options.metric,)

    def compute(self, values: Mapping[str, float]) -> float:
        return self.options.factor * values[self.options.metric]

    def describe(self) -> str:
        return f"{self.options.factor:g}·{self.options.metric}"


@pytest.fixture
def scale_formula(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _formula_entries.cache_clear()
    installed_formulas.cache_clear()
    monkeypatch.setitem(FORMULAS, "scale", _ScaleFormula)
    yield
    monkeypatch.undo()
    _formula_entries.cache_clear()
    installed_formulas.cache_clear()


@pytest.mark.usefixtures("scale_formula")
def test_a_formula_is_one_class_in_the_registry() -> None:
    assert value({"formula": "scale", "metric": "rouge"}) == Score(
        0.8, "scale: 2·rouge", details={"inputs": {"rouge": 0.4}}
    )
    with pytest.raises(ValidationError, match=r"scale\.metric\n  Field required"):
        ENTRY.validate_python({"name": "k", "formula": "scale"})


class _ShareFormula(_ScaleFormula):
    """A formula that declares its values' range (a share of a metric)."""

    key: ClassVar[str] = "share"
    value_range: ClassVar[tuple[float | None, float | None]] = (0.0, 100.0)


def test_a_kpis_score_config_has_the_range_its_formula_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """Langfuse's score config of a KPI: threshold's 0/1, a declared range, unbounded otherwise (issue 25)."""
    from trace_scorer.config.targets import TargetSettings
    from trace_scorer.scoring.plan import build_plan
    from trace_scorer.worker.scores import config_specs

    _formula_entries.cache_clear()
    installed_formulas.cache_clear()
    monkeypatch.setitem(FORMULAS, "share", _ShareFormula)
    try:
        target = TargetSettings.model_validate(
            {
                "name": "t",
                "metrics": [{"metric": "tool_call_accuracy"}],
                "kpis": [
                    {"name": "passes", "formula": "threshold", "metric": "tool_call_accuracy", "threshold": 0.5},
                    {"name": "sum", "formula": "weighted_sum", "weights": {"tool_call_accuracy": 2}},
                    {"name": "percent", "formula": "share", "metric": "tool_call_accuracy", "factor": 100},
                ],
            }
        )
        specs = {spec.name: (spec.min_value, spec.max_value) for spec in config_specs(build_plan(target))}
    finally:
        monkeypatch.undo()
        _formula_entries.cache_clear()
        installed_formulas.cache_clear()
    assert {name: specs[name] for name in ("passes", "sum", "percent")} == {
        "passes": (0.0, 1.0),
        "sum": (None, None),
        "percent": (0.0, 100.0),
    }

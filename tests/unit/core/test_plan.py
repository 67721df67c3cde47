"""Building a target's plan: every configuration error is found at start-up and names the key."""

from __future__ import annotations

from typing import Any

import pytest

from trace_scorer.config import ConfigError, TargetSettings
from trace_scorer.metrics.registry import MetricRegistry
from trace_scorer.scoring.plan import build_plan


def target(metrics: list[dict[str, Any]], kpis: list[dict[str, Any]] | None = None) -> TargetSettings:
    return TargetSettings.model_validate({"name": "t", "metrics": metrics, "kpis": kpis or []})


def test_order_levels_and_kpi_levels(toy_registry: MetricRegistry) -> None:
    plan = build_plan(
        target(
            [
                {"metric": "toy_halved", "name": "half", "source": "base"},
                {"metric": "toy_share_above", "name": "share", "source": "base"},
                {"metric": "toy_metadata_value", "name": "base"},
            ],
            [
                {"name": "both", "formula": "average", "metrics": ["base", "half"]},
                {"name": "run_ok", "formula": "threshold", "metric": "share", "threshold": 0.5},
                {"name": "combo", "formula": "expression", "expression": "both * run_ok"},
            ],
        ),
        registry=toy_registry,
    )
    assert [[m.name for m in level] for level in plan.sample_levels] == [["base"], ["half"]]
    assert [m.name for m in plan.group_metrics] == ["share"]
    # KPIs on a group-only result are computed per group only; the rest per sample and per group.
    assert [k.name for k in plan.sample_kpis] == ["both"]
    assert [k.name for k in plan.group_kpis] == ["both", "run_ok", "combo"]
    assert plan.group_score_names() == ["share", "share_n"]


def test_config_hash_changes_with_options_only(toy_registry: MetricRegistry) -> None:
    def plan_hash(field: str) -> str:
        return build_plan(
            target([{"metric": "toy_metadata_value", "name": "v", "field": field}]), registry=toy_registry
        ).config_hash

    assert plan_hash("x") == plan_hash("x")
    assert plan_hash("x") != plan_hash("y")


@pytest.mark.parametrize(
    ("metrics", "kpis", "expected"),
    [
        ([{"metric": "nope"}], [], r"targets\[0\]\.metrics\[0\]\.metric: unknown metric 'nope' \(known: .*toy_halved"),
        ([{"metric": "toy_halved"}], [], r"targets\[0\]\.metrics\[0\]\.source: Field required"),
        ([{"metric": "toy_metadata_value", "colour": 1}], [], r"targets\[0\]\.metrics\[0\]\.colour: unknown option"),
        (
            [{"metric": "toy_metadata_value"}, {"metric": "toy_metadata_value"}],
            [],
            r"targets\[0\]\.metrics\[1\]\.name: score name 'toy_metadata_value' "
            r"is already used by targets\[0\]\.metrics\[0\]",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "a"}],
            [{"name": "a", "formula": "average"}],
            r"targets\[0\]\.kpis\[0\]\.name: score name 'a' is already used",
        ),
        (
            [
                {"metric": "toy_share_above", "name": "s", "source": "x"},
                {"metric": "toy_metadata_value", "name": "s_n"},
            ],
            [],
            r"score name 's_n' is already used",
        ),
        (
            [{"metric": "toy_halved", "source": "ghost"}],
            [],
            r"targets\[0\]\.metrics\[0\]: reads 'ghost', which this target does not compute",
        ),
        (
            [
                {"metric": "toy_halved", "name": "a", "source": "b"},
                {"metric": "toy_halved", "name": "b", "source": "a"},
            ],
            [],
            r"targets\[0\]: metric dependency cycle: (a → b → a|b → a → b)",
        ),
        (
            [
                {"metric": "toy_share_above", "name": "s", "source": "v"},
                {"metric": "toy_metadata_value", "name": "v"},
                {"metric": "toy_halved", "name": "h", "source": "s"},
            ],
            [],
            r"targets\[0\]\.metrics\[2\]: a per-sample metric cannot read the per-group result 's'",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "v"}],
            [{"name": "k", "formula": "weighted_sum", "weights": {"v": 0.5, "rouge": 0.5}}],
            r"targets\[0\]\.kpis\[0\]: formula names 'rouge', which this target does not compute \(v, k\)",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "v"}],
            [
                {"name": "k1", "formula": "expression", "expression": "k2 + v"},
                {"name": "k2", "formula": "min", "metrics": ["k1"]},
            ],
            r"targets\[0\]: KPI dependency cycle",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "v"}],
            [{"name": "k", "formula": "expression", "expression": "v +* 2"}],
            r"targets\[0\]\.kpis\[0\]\.expression: cannot parse 'v \+\* 2' at column 4",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "v"}],
            [{"name": "k", "formula": "expression", "expression": "__import__('os').system('true')"}],
            r"targets\[0\]\.kpis\[0\]\.expression: cannot parse",
        ),
        (
            [{"metric": "toy_metadata_value", "name": "v"}],
            [{"name": "k", "formula": "weighted_sum", "weights": {"v": 1, "w": -1}, "normalize": True}],
            r"targets\[0\]\.kpis\[0\]: weights: normalize = true needs weights that do not sum to 0",
        ),
    ],
)
def test_configuration_errors(
    toy_registry: MetricRegistry, metrics: list[dict[str, Any]], kpis: list[dict[str, Any]], expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        build_plan(target(metrics, kpis), registry=toy_registry)


def test_error_names_the_target_index(toy_registry: MetricRegistry) -> None:
    with pytest.raises(ConfigError, match=r"^targets\[3\]\.metrics\[0\]\.metric"):
        build_plan(target([{"metric": "nope"}]), index=3, registry=toy_registry)

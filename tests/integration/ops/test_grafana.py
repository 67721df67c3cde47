"""deploy/grafana/trace-scorer.json: every PromQL query parses, and every metric it names is one the
worker really exports (scraped from a Telemetry whose every method was called once)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clocks import ManualClock as FakeClock
from tests.support.settings_examples import ROOT
from trace_scorer.metrics.base import Failed, Score, Skipped
from trace_scorer.ops import Health, Telemetry

DASHBOARD = ROOT / "deploy" / "grafana" / "trace-scorer.json"

#: Grafana's variables, replaced by something PromQL accepts.
_VARIABLES = {"$__rate_interval": "5m", "$__range": "6h", "$__interval": "1m", "$instance": ".*", "$target": ".*"}
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$")


def exported_names() -> set[str]:
    """Sample names of a Telemetry on which every method ran, the way /metrics shows them."""
    telemetry = Telemetry(clock=FakeClock())
    health = Health(clock=FakeClock())
    health.langfuse_ok()
    telemetry.export_health(health)
    t = "agent"
    telemetry.traces_seen(t)
    for unit in ("trace", "session", "observation"):
        telemetry.traces_scored(t, unit=unit)
        telemetry.traces_skipped(t, "not_finished", unit=unit)
        telemetry.traces_failed(t, unit=unit)
    telemetry.metric_outcomes(t, {"a": Score(1.0), "b": Skipped("x"), "c": Failed("y")})
    telemetry.scores_posted(t, 1)
    telemetry.scores_rejected(t, "rejected")
    telemetry.trace_scored_at(t, 0.0)
    telemetry.backlog(t, 3)
    telemetry.tick_finished(t, 1.0, ok=True)
    telemetry.langfuse_request("GET /api/public/health", 200, duration_seconds=0.1)
    telemetry.langfuse_retry("GET /api/public/health", 503, 2.0)
    telemetry.judge_call("p/m", prompt_tokens=1, completion_tokens=1, cost_usd=0.1, duration_seconds=1.0)
    telemetry.judge_retry("p/m", 429, 1.0)
    telemetry.waited("langfuse", "budget", 1.0)
    text = generate_latest(telemetry.registry).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for item in items:
        yield item
        yield from panels(item.get("panels", []))


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["query"]["query"])
            assert match, variable["query"]
            yield f"variable {variable['name']}", match.group(1)


def metric_names(expr: str) -> set[str]:
    for variable, value in sorted(_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    found: set[str] = set()

    def visit(node: Any, *_: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            found.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def test_every_query_names_exported_metrics(dashboard: dict[str, Any]) -> None:
    exported = exported_names()
    used: set[str] = set()
    for title, expr in queries(dashboard):
        names = metric_names(expr)
        assert names, f"{title}: no metric in {expr}"
        missing = names - exported
        assert not missing, f"{title}: {sorted(missing)} not exported"
        used |= names
    # the dashboard shows the metrics that matter (not just some of them)
    families = {re.sub(r"_(bucket|count|sum|total|created|info)$", "", n) for n in exported if n.startswith("trace_")}
    shown = {re.sub(r"_(bucket|count|sum|total|info)$", "", n) for n in used}
    # (the newest-trace timestamp is shown through the scoring lag computed from it)
    assert families - shown == {"trace_scorer_newest_scored_trace_timestamp_seconds"}


def test_unknown_metric_names_are_caught() -> None:
    assert metric_names('sum(rate(trace_scorer_tracs_scored_total{target=~"$target"}[$__rate_interval]))') == {
        "trace_scorer_tracs_scored_total"
    }
    with pytest.raises(ValueError):
        metric_names("sum(rate(trace_scorer_traces_scored_total[5m])")


def test_panels_are_described_and_laid_out(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "trace-scorer"
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "instance", "target"}
    ids = [p["id"] for p in panels(dashboard["panels"])]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels(dashboard["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))
        if panel["type"] != "row":
            assert panel["description"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}"

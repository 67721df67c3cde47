"""The shipped settings.toml on production traces (issue 26 items 3-5): a stand-in full of traces made the
way the SDK integrations make them (no references) gets the reference-free scores posted, faults show in
them, and ``traces_scored_total`` counts only traces with a score posted."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from standins.generate import Corpus, Scenario
from standins.langfuse_query import iso
from tests.support.clocks import FakeClock
from tests.support.fixtures import MakeLangfuse
from tests.support.paths import ROOT
from tests.support.worker import MakeHarness, traces_target
from trace_scorer.langfuse import ScoreSubject, score_id

CHECKS = {"tool_call_validity", "tool_errors", "tool_loops", "answer_completeness",
          "latency", "total_tokens", "total_cost", "tool_call_count"}  # fmt: skip
#: The formats whose generations declare their tools (the OTel semconv ones do so only on opt-in).
DECLARING = {"openai_chat", "openai_responses", "langchain", "anthropic"}
REFERENCE_METRICS = {"tool_call_accuracy", "tca_flexible", "tool_correctness", "rouge", "bleu"}


def production(clock: FakeClock, **overrides: Any) -> Scenario:
    values: dict[str, Any] = {"seed": 26, "traces": 40, "spacing": 5.0, "datasets": (), "fault_rate": 0.5,
                              "topics_rate": 0.0, "end": iso(clock.now() - timedelta(minutes=10))}  # fmt: skip
    values.update(overrides)
    return Scenario(**values)


def shipped_target() -> dict[str, Any]:
    """The shipped target, timed so that the whole backlog is read on the first tick."""
    target: dict[str, Any] = tomllib.loads((ROOT / "settings.toml").read_text(encoding="utf-8"))["targets"][0]
    target.update(lookback="2h", lag="0s", quiet_period="1m", max_window="6h")
    return target


def by_trace(scores: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for score in scores.values():
        out.setdefault(score["traceId"], {})[score["name"]] = score["value"]
    return out


@pytest.mark.parametrize("version", ["4.60.0", "4.16.0", "2.95.12"])
async def test_shipped_settings_post_reference_free_scores_on_production_traces(
    harness: MakeHarness, make_langfuse: MakeLangfuse, clock: FakeClock, version: str
) -> None:
    scenario = production(clock)
    langfuse = make_langfuse(version, scenario=scenario)
    corpus = Corpus(scenario)
    traces = corpus.expected_scored()
    h = await harness(shipped_target())
    context = await h.open()
    report = await h.tick(context)

    assert (report.seen, report.scored, report.failed) == (len(traces), len(traces), 0)
    posted = by_trace(langfuse.scores)
    assert set(posted) == set(traces)
    names = {name for values in posted.values() for name in values}
    assert names.isdisjoint(REFERENCE_METRICS) and names <= CHECKS
    for name in ("tool_errors", "tool_loops", "answer_completeness", "latency", "tool_call_count"):
        assert all(name in values for values in posted.values()), name
    # Declared tools, tokens and costs come from the generations: every format with generations has them.
    with_generations = [t for t in traces if corpus.find(t).format != "tool_observations"]  # type: ignore[union-attr]
    assert with_generations
    assert all("total_tokens" in posted[t] for t in with_generations)
    assert all("total_cost" in posted[t] and posted[t]["total_cost"] > 0 for t in with_generations)
    assert all(posted[t]["latency"] > 0 for t in traces)

    # The faults show where the format records them; fault-free traces look healthy.
    faults = {t: corpus.fault_of(t) for t in traces}
    assert {"loop", "invalid_call", "tool_error", "cut_off"} <= set(faults.values())
    for trace_id, fault in faults.items():
        values = posted[trace_id]
        fmt = corpus.find(trace_id).format  # type: ignore[union-attr]
        if fault == "loop":
            assert values["tool_loops"] == 1.0, (trace_id, fmt)
        else:
            assert values["tool_loops"] == 0.0, (trace_id, fmt)
        if fault == "invalid_call" and "tool_call_validity" in values:
            assert values["tool_call_validity"] < 1.0, (trace_id, fmt)
        if fault == "tool_error" and fmt in ("openai_chat", "langchain", "otel_genai", "tool_observations"):
            assert values["tool_errors"] > 0.0, (trace_id, fmt)
        if fault == "cut_off" and fmt in ("otel_genai", "anthropic"):
            assert values["answer_completeness"] == 0.0, (trace_id, fmt)
        if fmt in DECLARING:
            assert "tool_call_validity" in values, (trace_id, fmt)
        if fault is None and fmt != "tool_observations":
            assert values["tool_errors"] == 0.0 and values.get("tool_call_validity", 1.0) == 1.0, (trace_id, fmt)

    # Facts are posted as they are, with a score config that allows them.
    some = next(t for t in with_generations)
    tokens = langfuse.scores[score_id(ScoreSubject.trace(some), "total_tokens")]
    assert tokens["value"] == posted[some]["total_tokens"] > 1
    telemetry = context.ops.telemetry.registry
    assert telemetry.get_sample_value("trace_scorer_traces_scored_total", {"target": "agent"}) == len(traces)


async def test_traces_whose_every_metric_skipped_are_not_counted_as_scored(
    harness: MakeHarness, make_langfuse: MakeLangfuse, clock: FakeClock
) -> None:
    """Issue 26: reference metrics on production traces posted 0 scores while traces_scored_total said 52."""
    scenario = production(clock, traces=12, fault_rate=0.0)
    langfuse = make_langfuse("4.60.0", scenario=scenario)
    traces = Corpus(scenario).expected_scored()
    target = traces_target(lookback="2h", lag="0s", quiet_period="1m", max_window="6h", references={},
                           metrics=[{"metric": "tool_call_accuracy"}, {"metric": "rouge"}], kpis=[])  # fmt: skip
    h = await harness(target)
    context = await h.open()
    report = await h.tick(context)

    assert not langfuse.scores
    assert report.seen == len(traces) and report.scored == 0
    assert report.skipped["nothing to score"] == len(traces)
    report.count_skipped(context.ops.telemetry)  # as the service does after each tick
    telemetry = context.ops.telemetry.registry
    assert not telemetry.get_sample_value("trace_scorer_traces_scored_total", {"target": "agent"})
    skipped = {"target": "agent", "reason": "nothing_to_score"}
    assert telemetry.get_sample_value("trace_scorer_traces_skipped_total", skipped) == len(traces)
    # Done all the same: the watermark moved past them, no tick reads them again.
    again = await h.tick(context)
    assert (again.seen, again.scored, again.failed) == (0, 0, 0)


def test_the_shipped_target_has_the_checks() -> None:
    target = shipped_target()
    assert {m["metric"] for m in target["metrics"]} >= CHECKS
    assert Path(ROOT / "settings.toml").read_text(encoding="utf-8").count("# scope = \"session\"") == 1

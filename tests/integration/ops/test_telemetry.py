"""Telemetry: every method moves the series it should, labels stay bounded, the registry is isolated."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clocks import ManualClock as FakeClock
from trace_scorer.metrics.base import Failed, Score, Skipped
from trace_scorer.ops import Health, Telemetry


def scrape(telemetry: Telemetry) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(telemetry.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(telemetry: Telemetry, name: str, **labels: str) -> float | None:
    return scrape(telemetry).get((name, frozenset(labels.items())))


def test_work_counters(telemetry: Telemetry) -> None:
    telemetry.traces_seen("agent", 5)
    telemetry.traces_scored("agent", 3)
    telemetry.traces_skipped("agent", "not_finished", 1)
    telemetry.traces_skipped("agent", "sampled_out")
    telemetry.traces_failed("agent")
    telemetry.scores_posted("agent", 12)
    telemetry.scores_rejected("agent", "rejected", 2)
    assert value(telemetry, "trace_scorer_traces_seen_total", target="agent") == 5
    assert value(telemetry, "trace_scorer_traces_scored_total", target="agent") == 3
    assert value(telemetry, "trace_scorer_traces_skipped_total", target="agent", reason="not_finished") == 1
    assert value(telemetry, "trace_scorer_traces_skipped_total", target="agent", reason="sampled_out") == 1
    assert value(telemetry, "trace_scorer_traces_failed_total", target="agent") == 1
    assert value(telemetry, "trace_scorer_scores_posted_total", target="agent") == 12
    assert value(telemetry, "trace_scorer_scores_rejected_total", target="agent", reason="rejected") == 2


def test_metric_outcomes_by_score_name(telemetry: Telemetry) -> None:
    telemetry.metric_outcomes("agent", {"rouge": Score(0.5), "bleu": Skipped("expected absent"), "tca": Failed("x")})
    telemetry.metric_outcomes("agent", {"rouge": Score(0.7)})
    assert value(telemetry, "trace_scorer_metric_results_total", target="agent", metric="rouge", outcome="scored") == 2
    assert value(telemetry, "trace_scorer_metric_results_total", target="agent", metric="bleu", outcome="skipped") == 1
    assert value(telemetry, "trace_scorer_metric_results_total", target="agent", metric="tca", outcome="failed") == 1


def test_scoring_lag_is_computed_at_scrape_time(telemetry: Telemetry, clock: FakeClock) -> None:
    assert value(telemetry, "trace_scorer_scoring_lag_seconds", target="agent") is None
    telemetry.trace_scored_at("agent", clock.now - 90)
    telemetry.trace_scored_at("agent", clock.now - 300)  # older: does not move the newest
    assert value(telemetry, "trace_scorer_scoring_lag_seconds", target="agent") == 90
    assert value(telemetry, "trace_scorer_newest_scored_trace_timestamp_seconds", target="agent") == clock.now - 90
    clock.advance(60)
    assert value(telemetry, "trace_scorer_scoring_lag_seconds", target="agent") == 150
    telemetry.trace_scored_at("agent", datetime.fromtimestamp(clock.now - 10, tz=UTC))
    assert value(telemetry, "trace_scorer_scoring_lag_seconds", target="agent") == pytest.approx(10)


def test_backlog_set_and_removed(telemetry: Telemetry) -> None:
    telemetry.backlog("agent", None)  # never set: nothing to remove, no error
    telemetry.backlog("agent", 42)
    assert value(telemetry, "trace_scorer_backlog_traces", target="agent") == 42
    telemetry.backlog("agent", None)
    assert value(telemetry, "trace_scorer_backlog_traces", target="agent") is None


def test_ticks(telemetry: Telemetry, clock: FakeClock) -> None:
    with telemetry.tick("agent"):
        pass
    with pytest.raises(RuntimeError), telemetry.tick("agent"):
        raise RuntimeError("boom")
    telemetry.tick_finished("agent", 2.0, ok=True)
    assert value(telemetry, "trace_scorer_ticks_total", target="agent", outcome="ok") == 2
    assert value(telemetry, "trace_scorer_ticks_total", target="agent", outcome="error") == 1
    assert value(telemetry, "trace_scorer_tick_duration_seconds_count", target="agent") == 3
    assert value(telemetry, "trace_scorer_tick_duration_seconds_bucket", target="agent", le="2.5") == 3
    assert value(telemetry, "trace_scorer_last_successful_tick_timestamp_seconds", target="agent") == clock.now


def test_langfuse_requests_retries_and_waits(telemetry: Telemetry) -> None:
    endpoint = "GET /api/public/v2/observations"
    telemetry.langfuse_request(endpoint, 200, duration_seconds=0.05)
    telemetry.langfuse_request(endpoint, 429)
    telemetry.langfuse_request(endpoint, "timeout")
    telemetry.langfuse_retry(endpoint, 429, wait_seconds=7.0)
    telemetry.langfuse_retry(endpoint, "timeout", wait_seconds=2.0)
    telemetry.waited("langfuse", "budget", 1.5)
    telemetry.waited("langfuse", "budget", 0)  # nothing waited: no series change
    e = endpoint
    assert value(telemetry, "trace_scorer_langfuse_requests_total", endpoint=e, status="200") == 1
    assert value(telemetry, "trace_scorer_langfuse_requests_total", endpoint=e, status="429") == 1
    assert value(telemetry, "trace_scorer_langfuse_requests_total", endpoint=e, status="timeout") == 1
    assert value(telemetry, "trace_scorer_langfuse_request_duration_seconds_count", endpoint=e) == 1
    assert value(telemetry, "trace_scorer_langfuse_retries_total", endpoint=e, status="429") == 1
    assert value(telemetry, "trace_scorer_wait_seconds_total", service="langfuse", reason="rate_limit") == 7.0
    assert value(telemetry, "trace_scorer_wait_seconds_total", service="langfuse", reason="backoff") == 2.0
    assert value(telemetry, "trace_scorer_wait_seconds_total", service="langfuse", reason="budget") == 1.5


def test_judge_calls_tokens_cost(telemetry: Telemetry) -> None:
    model = "openrouter/google/gemini-2.5-flash"
    telemetry.judge_call(model, prompt_tokens=900, completion_tokens=100, cost_usd=0.0012, duration_seconds=1.2)
    telemetry.judge_call(model, "invalid", prompt_tokens=800, completion_tokens=50)
    telemetry.judge_call(model, "error")
    telemetry.judge_retry(model, 429, 3.0)
    assert value(telemetry, "trace_scorer_judge_calls_total", model=model, outcome="ok") == 1
    assert value(telemetry, "trace_scorer_judge_calls_total", model=model, outcome="invalid") == 1
    assert value(telemetry, "trace_scorer_judge_calls_total", model=model, outcome="error") == 1
    assert value(telemetry, "trace_scorer_judge_tokens_total", model=model, kind="prompt") == 1700
    assert value(telemetry, "trace_scorer_judge_tokens_total", model=model, kind="completion") == 150
    assert value(telemetry, "trace_scorer_judge_cost_usd_total", model=model) == pytest.approx(0.0012)
    assert value(telemetry, "trace_scorer_judge_call_duration_seconds_count", model=model) == 1
    assert value(telemetry, "trace_scorer_judge_retries_total", model=model, status="429") == 1
    assert value(telemetry, "trace_scorer_wait_seconds_total", service="judge", reason="rate_limit") == 3.0


def test_label_values_are_sanitised_and_bounded(clock: FakeClock) -> None:
    telemetry = Telemetry(clock=clock, max_label_values=3)
    telemetry.traces_skipped("agent", "Trace Not Finished!")
    for i in range(10):  # a bug that puts ids into a label must not explode the series count
        telemetry.traces_skipped("agent", f"id-{i}")
    series = {labels for (name, labels) in scrape(telemetry) if name == "trace_scorer_traces_skipped_total"}
    reasons = sorted(dict(labels)["reason"] for labels in series)
    assert reasons == ["id-0", "id-1", "other", "trace_not_finished"]
    assert value(telemetry, "trace_scorer_traces_skipped_total", target="agent", reason="other") == 8


def test_registries_are_isolated(clock: FakeClock) -> None:
    one, two = Telemetry(clock=clock), Telemetry(clock=clock)
    one.traces_scored("agent", 1)
    assert value(one, "trace_scorer_traces_scored_total", target="agent") == 1
    assert value(two, "trace_scorer_traces_scored_total", target="agent") is None


def test_build_info_process_metrics_and_health_export(telemetry: Telemetry, health: Health) -> None:
    telemetry.export_health(health)
    samples = scrape(telemetry)
    names = {name for name, _ in samples}
    assert "trace_scorer_build_info" in names
    assert "process_resident_memory_bytes" in names
    assert value(telemetry, "trace_scorer_up", probe="liveness") == 1
    assert value(telemetry, "trace_scorer_up", probe="readiness") == 0
    assert "trace_scorer_langfuse_up" not in names  # unknown before the first check
    health.config_loaded()
    health.langfuse_ok()
    assert value(telemetry, "trace_scorer_langfuse_up") == 1
    assert value(telemetry, "trace_scorer_up", probe="readiness") == 1


def test_every_name_follows_the_conventions(telemetry: Telemetry, health: Health) -> None:
    telemetry.export_health(health)
    for family in telemetry.registry.collect():
        if family.name.startswith(("process_", "python_")):
            continue
        assert family.name.startswith("trace_scorer_"), family.name
        assert family.documentation, family.name
        if family.type == "counter":
            assert not family.name.endswith("_total")  # the client adds it to the samples
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)

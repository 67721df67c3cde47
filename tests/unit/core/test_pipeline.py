"""The pipeline: per-sample metrics with dependencies, KPIs, group metrics and run-level KPIs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from trace_scorer.config import TargetSettings
from trace_scorer.metrics.base import Failed, Score, Skipped
from trace_scorer.metrics.registry import MetricRegistry
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan


def pipeline(
    registry: MetricRegistry, metrics: list[dict[str, Any]], kpis: list[dict[str, Any]] | None = None
) -> Pipeline:
    target = TargetSettings.model_validate({"name": "t", "metrics": metrics, "kpis": kpis or []})
    return Pipeline(build_plan(target, registry=registry))


def sample(sample_id: str, **metadata: Any) -> Sample:
    return Sample(id=sample_id, metadata=metadata)


async def test_dependencies_kpis_and_groups(toy_registry: MetricRegistry) -> None:
    p = pipeline(
        toy_registry,
        [
            {"metric": "toy_metadata_value", "name": "base"},
            {"metric": "toy_halved", "name": "half", "source": "base"},
            {"metric": "toy_share_above", "name": "share", "source": "base"},
        ],
        [
            {"name": "quality", "formula": "weighted_sum", "weights": {"base": 0.5, "half": 1.0}},
            {"name": "run_ok", "formula": "threshold", "metric": "share", "threshold": 0.5, "direction": ">"},
        ],
    )
    results = [await p.score_sample(sample(f"s{i}", x=x)) for i, x in enumerate([0.2, 0.6, 1.0])]
    results.append(await p.score_sample(sample("s3")))  # metadata.x absent → skipped all the way down

    assert results[1].values(kpis=False) == {"base": 0.6, "half": 0.3}
    assert results[1].values(kpis=True) == pytest.approx({"quality": 0.6})
    assert results[3].reasons(Skipped) == {
        "base": "metadata.x absent",
        "half": "base has no value",
        "quality": "quality: input 'base' has no value (metadata.x absent)",
    }

    group = await p.score_group("run-1", results)
    assert group.size == 4
    assert group.values(kpis=False) == pytest.approx({"base": 0.6, "half": 0.3, "share": 2 / 3, "share_n": 0.03})
    # Run-level KPIs use the run-level means (0.5·0.6 + 0.3), not the mean of per-sample KPIs.
    assert group.values(kpis=True) == pytest.approx({"quality": 0.6, "run_ok": 1.0})
    base = group.outcomes["base"]
    assert isinstance(base, Score) and base.details == {"n": 3, "skipped": 1, "failed": 0}


async def test_group_where_nothing_scored(toy_registry: MetricRegistry) -> None:
    p = pipeline(toy_registry, [{"metric": "toy_metadata_value", "name": "v"}], [{"name": "k", "formula": "average"}])
    group = await p.score_group("g", [await p.score_sample(sample("a"))])
    assert group.reasons(Skipped) == {
        "v": "no sample of the group has a value for v",
        "k": "k: input 'v' has no value (no sample of the group has a value for v)",
    }


async def test_metric_exception_becomes_failure_not_crash(toy_registry: MetricRegistry) -> None:
    p = pipeline(toy_registry, [{"metric": "toy_exploding"}, {"metric": "toy_metadata_value", "name": "v"}])
    result = await p.score_sample(sample("a", x=1))
    assert result.reasons(Failed) == {"toy_exploding": "RuntimeError: boom"}
    assert result.values(kpis=False) == {"v": 1.0}


async def test_out_of_range_value_is_refused(toy_registry: MetricRegistry) -> None:
    p = pipeline(toy_registry, [{"metric": "toy_out_of_range"}])
    result = await p.score_sample(sample("a"))
    assert result.reasons(Failed) == {"toy_out_of_range": "value 1.5 is outside [0, 1]"}


async def test_metric_needing_an_unconfigured_judge_is_skipped_with_advice(toy_registry: MetricRegistry) -> None:
    p = pipeline(toy_registry, [{"metric": "toy_needs_judge"}, {"metric": "toy_metadata_value", "name": "v"}])
    result = await p.score_sample(sample("a", x=0.5))
    reason = result.reasons(Skipped)["toy_needs_judge"]
    assert "no judge model configured" in reason and "[[providers]]" in reason
    assert result.values(kpis=False) == {"v": 0.5}


async def test_required_fields_absent_vs_empty(toy_registry: MetricRegistry) -> None:
    from tests.support.toy_metrics import MetadataValue

    class NeedsReference(MetadataValue):
        key = "toy_needs_reference"
        requires = ("reference_tool_calls",)

    p = pipeline(toy_registry.with_classes(NeedsReference), [{"metric": "toy_needs_reference"}])
    absent = await p.score_sample(Sample(id="a", metadata={"x": 1}))
    empty = await p.score_sample(Sample(id="b", metadata={"x": 1}, reference_tool_calls=[]))
    assert absent.reasons(Skipped) == {"toy_needs_reference": "reference_tool_calls absent"}
    assert empty.values(kpis=False) == {"toy_needs_reference": 1.0}


async def test_division_by_zero_in_kpi_is_a_skip(toy_registry: MetricRegistry) -> None:
    p = pipeline(
        toy_registry,
        [{"metric": "toy_metadata_value", "name": "v"}],
        [{"name": "ratio", "formula": "expression", "expression": "1 / v"}],
    )
    assert (await p.score_sample(sample("a", x=0.5))).values(kpis=True) == {"ratio": 2.0}
    zero = await p.score_sample(sample("b", x=0))
    assert zero.reasons(Skipped) == {"ratio": "ratio: division by zero in 1 / v"}


async def test_concurrent_scoring_keeps_input_order(toy_registry: MetricRegistry) -> None:
    p = pipeline(toy_registry, [{"metric": "toy_metadata_value", "name": "v"}])
    samples = [sample(f"s{i}", x=i / 100) for i in range(50)]
    ids = [r.sample.id async for r in p.score_samples(samples, concurrency=8)]
    assert ids == [s.id for s in samples]


async def test_a_stream_is_scored_while_it_is_read_and_its_error_comes_after_what_started(
    toy_registry: MetricRegistry,
) -> None:
    """score_stream hands a result on before the source has produced the next sample (the source here
    waits for the first result: read-all-then-score could never finish), keeps at most ``concurrency``
    samples in flight, and raises the source's error only after the samples already read are yielded."""
    p = pipeline(toy_registry, [{"metric": "toy_metadata_value", "name": "v"}])
    first_result = asyncio.Event()
    in_flight, peak = 0, 0
    original = p.score_sample

    async def counted(s: Sample) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0)
            return await original(s)
        finally:
            in_flight -= 1

    p.score_sample = counted  # type: ignore[method-assign]

    async def samples() -> AsyncGenerator[Sample, None]:
        yield sample("s0", x=0.0)
        await asyncio.wait_for(first_result.wait(), timeout=10)  # a safety net: fails, never waits
        for i in range(1, 6):
            yield sample(f"s{i}", x=i / 10)
        raise RuntimeError("the read broke")

    seen = []
    with pytest.raises(RuntimeError, match="the read broke"):
        async for result in p.score_stream(samples(), concurrency=2):
            seen.append(result.sample.id)
            first_result.set()
    assert sorted(seen) == [f"s{i}" for i in range(6)] and seen[0] == "s0"
    assert peak == 2

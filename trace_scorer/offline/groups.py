"""Run-level results of groups of samples (``group_by``): ``score``, ``compare`` and the Python API group
the same way."""

from __future__ import annotations

from collections.abc import Sequence

from trace_scorer.config.targets import ALL_SAMPLES
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import GroupResult, Pipeline, SampleResult


def group_key(sample: Sample, field: str) -> str | None:
    """The group ``sample`` belongs to under ``group_by = field`` (None: in no group)."""
    if field == ALL_SAMPLES:
        return "all"
    if field.startswith("metadata."):
        value = sample.metadata.get(field.removeprefix("metadata."))
    else:
        value = getattr(sample, field, None)
    return None if value is None else str(value)


async def score_groups(pipeline: Pipeline, group_by: str | None, results: Sequence[SampleResult]) -> list[GroupResult]:
    """Run-level results per group of ``results`` (first-seen order), or none without ``group_by``."""
    if not group_by:
        return []
    members: dict[str, list[SampleResult]] = {}
    for result in results:
        key = group_key(result.sample, group_by)
        if key is not None:
            members.setdefault(key, []).append(result)
    return [await pipeline.score_group(key, group) for key, group in members.items()]

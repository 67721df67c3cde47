"""pass@k and pass^k (docs/metrics.md "pass@k and pass^k"): how reliably the agent answers one question.

A per-group metric. The group is a set of runs (or one run, or a whole offline file); inside it the
attempts at one question are the samples sharing an item id. An attempt is correct when another metric's
value on it reaches a threshold — by default ``answer_similarity`` (embedding cosine similarity to the
expected answer) ≥ 0.8, or e.g. ``agent_goal_accuracy >= 1``; scores already computed in the run are
reused, never recomputed.

Per item with n attempts of which c are correct:
  pass@k = 1 − C(n−c, k) / C(n, k)   (Chen et al. 2021: at least one of k drawn attempts is correct)
  pass^k = C(c, k) / C(n, k)         (τ-bench: all k drawn attempts are correct)
The dataset value is the mean over items with n ≥ k; items with fewer attempts are left out and counted.
With k = n they equal any() / all() of the attempts; with k < n they are the unbiased estimates of
drawing k of the n attempts, which any()/all() over the first k would only approximate.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.metrics.base import GroupInput, Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample

_DIRECTIONS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, ">": operator.gt}


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n−c, k)/C(n, k), as the product form Chen et al. give: no huge binomials, no cancellation."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    failing_draws = 1.0
    for i in range(n - c + 1, n + 1):
        failing_draws *= 1.0 - k / i
    return 1.0 - failing_draws


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k)/C(n, k) = Π_{i<k} (c−i)/(n−i): the chance that k attempts drawn without replacement all pass."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    value = 1.0
    for i in range(k):
        value *= (c - i) / (n - i)
    return max(value, 0.0)


class PassAtKOptions(MetricOptions):
    #: The values of k to report (each gives pass_at_{k} and pass_hat_{k}).
    k: list[int] = Field(default_factory=lambda: [1], min_length=1)
    #: The per-sample score that decides whether an attempt is correct.
    correct_when: str = "answer_similarity"
    #: An attempt is correct when its ``correct_when`` value is ≥ (or >) this.
    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    direction: Literal[">=", ">"] = ">="
    #: The sample field that says which question an attempt answers (``metadata.KEY`` for metadata).
    attempts_by: str = "item_id"

    @field_validator("k")
    @classmethod
    def _positive_unique(cls, values: list[int]) -> list[int]:
        if any(k < 1 for k in values):
            raise ValueError("every k must be at least 1")
        if len(set(values)) != len(values):
            raise ValueError("k values must be distinct")
        return sorted(values)


def attempt_key(sample: Sample, field: str) -> str | None:
    if field.startswith("metadata."):
        value: Any = sample.metadata.get(field.removeprefix("metadata."))
    else:
        value = getattr(sample, field, None)
    return None if value is None else str(value)


class PassAtK(Metric[PassAtKOptions]):
    """pass@k and pass^k over the attempts at each question of a group."""

    key: ClassVar[str] = "pass_at_k"
    description: ClassVar[str] = "pass@k and pass^k across repeated attempts at the same question"
    Options: ClassVar[type[PassAtKOptions]] = PassAtKOptions
    per_group: ClassVar[bool] = True

    def reads(self) -> tuple[str, ...]:
        return (self.options.correct_when,)

    def output_names(self) -> tuple[str, ...]:
        return tuple(name for k in self.options.k for name in (f"pass_at_{k}", f"pass_hat_{k}"))

    async def score_group(self, group: GroupInput) -> MetricOutput:
        opts = self.options
        passes = _DIRECTIONS[opts.direction]
        attempts: dict[str, list[bool]] = {}
        unjudged = 0
        for sample, results in zip(group.samples, group.results, strict=True):
            item = attempt_key(sample, opts.attempts_by)
            judged: Outcome | None = results.get(opts.correct_when)
            if item is None or not isinstance(judged, Score):
                unjudged += 1  # no question to group by, or correctness unknown: not an attempt
                continue
            attempts.setdefault(item, []).append(passes(judged.value, opts.threshold))
        if not attempts:
            return Skipped(
                f"no attempt has both a {opts.attempts_by} and a {opts.correct_when} value ({unjudged} samples)"
            )

        outcomes: dict[str, Outcome] = {}
        for k in opts.k:
            usable = {item: tries for item, tries in attempts.items() if len(tries) >= k}
            short = len(attempts) - len(usable)
            if not usable:
                reason = f"no question has {k} attempts (most: {max(len(t) for t in attempts.values())})"
                outcomes[f"pass_at_{k}"] = outcomes[f"pass_hat_{k}"] = Skipped(reason)
                continue
            at = [pass_at_k(len(t), sum(t), k) for t in usable.values()]
            hat = [pass_hat_k(len(t), sum(t), k) for t in usable.values()]
            details = {
                "k": k,
                "items": len(usable),
                "items_with_fewer_than_k_attempts": short,
                "samples_without_correctness": unjudged,
                "correct_when": f"{opts.correct_when} {opts.direction} {opts.threshold:g}",
                "attempts": {item: {"n": len(t), "correct": sum(t)} for item, t in sorted(usable.items())},
            }
            note = f"; {short} with fewer than {k} attempts left out" if short else ""
            outcomes[f"pass_at_{k}"] = Score(sum(at) / len(at), f"pass@{k} over {len(usable)} questions{note}", details)
            outcomes[f"pass_hat_{k}"] = Score(
                sum(hat) / len(hat), f"pass^{k} over {len(usable)} questions{note}", details
            )
        return outcomes

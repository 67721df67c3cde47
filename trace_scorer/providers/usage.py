"""Token usage and cost: per call, summed per model, per metric and per trace."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens spent by one or more LLM calls; ``cost`` in USD, ``None`` when some call had no price."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    cost: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            cost,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_details(self) -> dict[str, Any]:
        """The shape used in score details: tokens, calls, and cost when every call had a price."""
        out: dict[str, Any] = {
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "calls": self.calls,
        }
        if self.cost is not None and self.calls:
            out["cost_usd"] = round(self.cost, 8)
        return out


def total(usages: list[Usage]) -> Usage:
    result = Usage()
    for usage in usages:
        result += usage
    return result


class UsageLedger:
    """Running totals of what the judge spent, by metric (score name) and by model, for reports and logs."""

    def __init__(self) -> None:
        self._by_metric: dict[str, Usage] = defaultdict(Usage)
        self._by_model: dict[str, Usage] = defaultdict(Usage)

    def add(self, metric: str, model: str, usage: Usage) -> None:
        self._by_metric[metric] += usage
        self._by_model[model] += usage

    def by_metric(self) -> dict[str, Usage]:
        """Usage by metric (reports sum by model). For tests and benches only."""
        return dict(self._by_metric)

    def by_model(self) -> dict[str, Usage]:
        return dict(self._by_model)

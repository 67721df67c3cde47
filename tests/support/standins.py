"""Scenarios and handle types for the tests on the loopback stand-ins (:mod:`standins`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from standins.generate import DatasetSpec, Scenario
from standins.handles import LangfuseHandle, OpenAIHandle

#: A backlog well in the past: every row is visible, and a local Corpus of the same scenario is identical.
END = "2026-11-01T12:00:00+00:00"


def small_scenario(**overrides: Any) -> Scenario:
    values: dict[str, Any] = {
        "seed": 11,
        "traces": 60,
        "spacing": 4.0,
        "end": END,
        "duplicate_rate": 0.3,
        "datasets": (DatasetSpec(name="agent-bench", items=5, runs=2, attempts=2),),
    }
    values.update(overrides)
    return Scenario(**values)


StartLangfuse = Callable[..., LangfuseHandle]
StartOpenAI = Callable[..., OpenAIHandle]

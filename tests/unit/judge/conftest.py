"""Fixtures: a respx-mocked OpenAI-compatible endpoint, and judges whose waits are recorded, not slept."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import respx

from tests.judge.helpers import ScriptedLLM, settings
from trace_scorer.judge import Judge, build_judge
from trace_scorer.metrics.base import Metric, Resources


class SleepRecorder:
    """Stands in for asyncio.sleep: records the waits and advances a virtual clock, returning at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._slept = 0.0

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._slept += seconds

    def clock(self) -> float:
        return time.monotonic() + self._slept


@pytest.fixture
def llm() -> Any:
    scripted = ScriptedLLM()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=scripted)
        yield scripted


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


JudgeFactory = Callable[..., Awaitable[Judge]]


@pytest.fixture
async def make_judge(sleeps: SleepRecorder) -> AsyncIterator[JudgeFactory]:
    built: list[Judge] = []

    async def factory(*providers: dict[str, Any], **judge_options: Any) -> Judge:
        environ = {p["api_key_env"]: "sk-test" for p in providers if p.get("api_key_env")}
        judge = build_judge(
            settings(*providers, **judge_options), environ=environ, sleep=sleeps, clock=sleeps.clock
        )
        assert judge is not None
        built.append(judge)
        return judge

    yield factory
    for judge in built:
        await judge.aclose()


def make_metric(cls: type[Metric[Any]], judge: Judge | None, name: str | None = None, **options: Any) -> Any:
    metric = cls(name or cls.key, cls.Options(**options), Resources(judge=judge))
    metric.check()
    return metric

"""Fixtures: a respx-mocked OpenAI-compatible endpoint, and judges whose waits are recorded, not slept
(``sleeps`` comes from :mod:`tests.support.fixtures`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import respx

from tests.support.clocks import SleepRecorder
from tests.support.judge import JudgeFactory, ScriptedLLM, settings
from trace_scorer.judge import Judge, build_judge


@pytest.fixture
def llm() -> Any:
    scripted = ScriptedLLM()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=scripted)
        yield scripted


@pytest.fixture
async def make_judge(sleeps: SleepRecorder) -> AsyncIterator[JudgeFactory]:
    built: list[Judge] = []

    async def factory(*providers: dict[str, Any], **judge_options: Any) -> Judge:
        environ = {p["api_key_env"]: "sk-test" for p in providers if p.get("api_key_env")}
        judge = build_judge(settings(*providers, **judge_options), environ=environ, sleep=sleeps, clock=sleeps.clock)
        assert judge is not None
        built.append(judge)
        return judge

    yield factory
    for judge in built:
        await judge.aclose()

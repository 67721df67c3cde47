"""Fixture of the end-to-end fault and crash tests: the loopback stand-ins up, the expectations computed
(:mod:`tests.support.e2e`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import LangfuseHandle, OpenAIHandle, start_langfuse, start_openai
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions
from tests.support.e2e import Run, StartRun, expected_scores


@pytest.fixture
def start_run(tmp_path: Path) -> Iterator[StartRun]:
    """``start_run(scenario, target, generation=… or version=…, langfuse_faults=…, llm_faults=…)``:
    stand-ins up (threads), expectations computed."""
    handles: list[LangfuseHandle | OpenAIHandle] = []
    runs: list[Run] = []

    def start(
        scenario: Scenario,
        target: dict[str, Any],
        *,
        generation: str = "v4",
        version: str | None = None,
        langfuse_faults: FaultConfig | None = None,
        llm_faults: FaultConfig | None = None,
    ) -> Run:
        options = LangfuseOptions(
            generation=None if version else generation,
            version=version,
            scenario=scenario,
            faults=langfuse_faults or FaultConfig(),
        )
        lf = start_langfuse(options)
        handles.append(lf)
        llm = start_openai(OpenAIOptions(profile="openai", faults=llm_faults or FaultConfig()))
        handles.append(llm)
        run = Run(lf, llm, scenario, target, tmp_path, expected_scores(scenario, target))
        runs.append(run)
        return run

    yield start
    for run in runs:
        for worker in run.workers:
            if worker.running():
                worker.kill9()
    problems: list[str] = []
    for handle in handles:
        try:
            problems += handle.violations()
        finally:
            handle.stop()
    assert not problems, "contract violations:\n" + "\n".join(problems[:20])

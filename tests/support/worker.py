"""The worker harness: opens worker contexts (as `trace-scorer run` would) on the in-process Langfuse
stand-in and ticks targets; a realistic agent trace (v4 rows, served by a v3 server as a legacy trace),
targets and settings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import BASE_URL, PUBLIC, SECRET
from trace_scorer.config.settings import Settings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.metrics.base import Failed, Metric, MetricOptions, MetricOutput, Outcome, Score
from trace_scorer.ops import Ops
from trace_scorer.sample import Sample
from trace_scorer.worker.service import Context, open_context
from trace_scorer.worker.tick import TickReport

#: ``settings.toml`` of the CLI tests: one traces target on the in-process Langfuse, the state in the
#: working directory (fixture ``cli_workdir``).
#: The settings of a CLI test without a ``[state]`` section (the SQLite default, or a URL from the environment).
CLI_SETTINGS_WITHOUT_STATE = f"""
[log]
level = "WARNING"
[langfuse]
base_url = "{BASE_URL}"
[http]
enabled = false
[[targets]]
name = "agent"
max_window = "6h"
  [targets.references]
  expected = ["$.trace.metadata.expected_answer"]
  reference_tool_calls = ["$.trace.metadata.expected_calls"]
  [[targets.metrics]]
  metric = "tool_call_accuracy"
  [[targets.metrics]]
  metric = "rouge"
"""
CLI_SETTINGS = CLI_SETTINGS_WITHOUT_STATE + '[state]\npath = "state.db"\n'

# Production traces carry their references in the trace's metadata (as teams attach golden calls).
REFERENCES = {
    "expected": ["$.trace.metadata.expected_answer"],
    "reference_tool_calls": ["$.trace.metadata.expected_calls"],
}

#: Trace ids for which the toy "flaky" metric fails (as if every judge model were down).
FLAKY: set[str] = set()
#: Trace ids whose ``test_flaky`` score waits for the event (to hold a trace back until something happened).
GATES: dict[str, asyncio.Event] = {}


class Flaky(Metric[MetricOptions]):
    """Fails on the traces listed in FLAKY, scores 1.0 elsewhere."""

    key = "test_flaky"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        if sample.id in GATES:
            await GATES[sample.id].wait()
        if sample.id in FLAKY:
            return Failed("all judge models failed (test)")
        return Score(1.0, "fine")


def agent_trace(
    trace_id: str,
    start: datetime,
    *,
    duration: float = 5.0,
    ended: bool = True,
    name: str = "weather-agent",
    environment: str = "production",
    city: str = "Tokyo",
    expected_city: str = "Tokyo",
    answer: str = "It is 18 °C in Tokyo with light rain.",
) -> list[dict[str, Any]]:
    """A realistic v4 trace: an AGENT root, an OpenAI generation calling a tool, the TOOL run."""
    root_id, call_args = f"{trace_id}-root", {"city": city}
    user = {"role": "user", "content": f"What's the weather in {city}?"}
    metadata = {
        "expected_answer": f"In {expected_city} it is 18 °C with light rain.",
        "expected_calls": [{"name": "get_weather", "arguments": {"city": expected_city}}],
    }
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(call_args)}}

    def step(key: str, at: float, **fields: Any) -> dict[str, Any]:
        """A child observation of the root lasting a second, ``at`` seconds after the start."""
        begin = start + timedelta(seconds=at)
        end = begin + timedelta(seconds=1)
        return f.observation(
            f"{trace_id}-{key}", trace_id, begin, end=end, parent=root_id, environment=environment, **fields
        )

    root = f.observation(
        root_id,
        trace_id,
        start,
        end=start + timedelta(seconds=duration) if ended else None,
        type="AGENT",
        name=name,
        trace_name=name,
        input={"messages": [user]},
        environment=environment,
        output={"role": "assistant", "content": answer} if ended else None,
        metadata=metadata,
    )
    generation = {"role": "assistant", "content": None, "tool_calls": [call]}
    return [
        root,
        step("gen", 1, type="GENERATION", name="OpenAI-generation", model="gpt-x", input=[user], output=generation),
        step(
            "tool",
            2,
            type="TOOL",
            name="get_weather",
            input=call_args,
            output={"temperature": 18, "condition": "light rain"},
        ),
    ]


def settings_for(tmp_path: Path, *targets: dict[str, Any], **sections: Any) -> Settings:
    return Settings(
        langfuse={"base_url": BASE_URL, "public_key": PUBLIC, "secret_key": SecretStr(SECRET)},
        state={"path": str(tmp_path / "state.db")},
        http={"enabled": False},
        targets=list(targets),
        **sections,
    )


def traces_target(**overrides: Any) -> dict[str, Any]:
    target: dict[str, Any] = {
        "name": "agent",
        "source": "traces",
        "lookback": "1h",
        "lag": "2m",
        "quiet_period": "5m",
        "references": REFERENCES,
        "metrics": [{"metric": "tool_call_accuracy"}, {"metric": "rouge"}, {"metric": "test_flaky"}],
        "kpis": [{"name": "quality", "formula": "weighted_sum", "weights": {"tool_call_accuracy": 0.6, "rouge": 0.4}}],
    }
    target.update(overrides)
    return target


@dataclass
class Harness:
    """Opens worker contexts (as `trace-scorer run` would) on the stand-in; ticks a target at a given time."""

    settings: Settings
    clock: FakeClock
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    contexts: list[Context] = field(default_factory=list)

    async def open(self, settings: Settings | None = None) -> Context:
        """A fresh context (a restart: new client, state reopened from the same file)."""
        settings = settings or self.settings
        stack = AsyncExitStack()
        await self.stack.enter_async_context(stack)
        client = LangfuseClient(settings.langfuse, clock=self.clock)
        stack.push_async_callback(client.aclose)
        context = await open_context(settings, stack, ops=Ops.from_settings(settings.http), client=client)
        self.contexts.append(context)
        return context

    async def tick(self, context: Context, target: str = "agent", now: datetime | None = None) -> TickReport:
        import asyncio

        return await context.sources[target].tick(now or self.clock.now(), asyncio.Event())


MakeHarness = Callable[..., Awaitable[Harness]]


def weather_reference(city: str) -> dict[str, Any]:
    """A dataset item's expected output: the answer and the get_weather call for ``city``."""
    return {
        "answer": f"In {city} it is 18 °C with light rain.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": city}}],
    }


def bench_target(**overrides: Any) -> dict[str, Any]:
    """A dataset-runs target ``bench`` over the dataset ``agent-bench`` (tool_call_accuracy and rouge);
    ``overrides``: any target key."""
    target: dict[str, Any] = {
        "name": "bench",
        "source": "dataset_runs",
        "datasets": ["agent-bench"],
        "lookback": "7d",
        "quiet_period": "5m",
        "metrics": [{"metric": "tool_call_accuracy"}, {"metric": "rouge"}],
    }
    target.update(overrides)
    return target

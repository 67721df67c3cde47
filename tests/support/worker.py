"""The worker harness: opens worker contexts (as `trace-scorer run` would) on the contract-checking fake
Langfuse and ticks targets; realistic agent traces (v4 rows, v3 traces), targets and settings."""

from __future__ import annotations

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
from tests.support.langfuse_client import PUBLIC, SECRET
from tests.support.langfuse_fake import BASE_URL
from trace_scorer.config.settings import Settings
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.metrics.base import Failed, Metric, MetricOptions, MetricOutput, Outcome, Score
from trace_scorer.ops import Ops
from trace_scorer.sample import Sample
from trace_scorer.worker.service import Context, open_context
from trace_scorer.worker.tick import TickReport

# Production traces carry their references in the trace's metadata (as teams attach golden calls).
REFERENCES = {
    "expected": ["$.trace.metadata.expected_answer"],
    "reference_tool_calls": ["$.trace.metadata.expected_calls"],
}

#: Trace ids for which the toy "flaky" metric fails (as if every judge model were down).
FLAKY: set[str] = set()


class Flaky(Metric[MetricOptions]):
    """Fails on the traces listed in FLAKY, scores 1.0 elsewhere."""

    key = "test_flaky"

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
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
    return [
        f.observation(
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
        ),
        f.observation(
            f"{trace_id}-gen",
            trace_id,
            start + timedelta(seconds=1),
            end=start + timedelta(seconds=2),
            type="GENERATION",
            name="OpenAI-generation",
            parent=root_id,
            environment=environment,
            model="gpt-x",
            input=[user],
            output={
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps(call_args)},
                    }
                ],
            },
        ),
        f.observation(
            f"{trace_id}-tool",
            trace_id,
            start + timedelta(seconds=2),
            end=start + timedelta(seconds=3),
            type="TOOL",
            name="get_weather",
            parent=root_id,
            environment=environment,
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
    """Opens worker contexts (as `trace-scorer run` would) on the fake; ticks a target at a given time."""

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


def v3_agent_trace(trace_id: str, start: datetime, city: str) -> dict[str, Any]:
    """The same agent run as `agent_trace`, in the v3 shape (a trace with its observations)."""
    user = {"role": "user", "content": f"What's the weather in {city}?"}
    return f.v3_trace(
        trace_id,
        start,
        name="weather-agent",
        input={"messages": [user]},
        output={"role": "assistant", "content": f"It is 18 °C in {city} with light rain."},
        observations=[
            f.v3_observation(
                f"{trace_id}-gen",
                trace_id,
                start + timedelta(seconds=1),
                end=start + timedelta(seconds=2),
                type="GENERATION",
                name="OpenAI-generation",
                input=[user],
                output={
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
                        }
                    ],
                },
            ),
            f.v3_observation(
                f"{trace_id}-tool",
                trace_id,
                start + timedelta(seconds=2),
                end=start + timedelta(seconds=3),
                type="TOOL",
                name="get_weather",
                input={"city": city},
                output={"temperature": 18},
            ),
        ],
    )

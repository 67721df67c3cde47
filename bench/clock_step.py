"""The clock-step case of issue #22 (item 1), before and after: the worker in this process on the loopback
Langfuse stand-in (which dates its answers with the real clock), its wall clock stepped as NTP steps it
after a VM resume. Real time passes (a second's interval), so this is a demonstration with figures, not
a test; the tests are ``tests/integration/worker/test_clock_steps.py``.

    .venv/bin/python bench/clock_step.py            # this checkout
    PYTHONPATH=/path/to/an/older/checkout .venv/bin/python bench/clock_step.py   # an older release

Phases: 3 traces scored with a right clock; the clock 2 h ahead for 5 s; right again, then 20 traces arrive
(scored?); a restart on the same state (scored now?); the clock 1 h behind, 5 traces arrive (ticks? scored?).
After each phase: what ``/healthz``, ``/readyz`` and ``/metrics`` answered (the probes' bodies and the
ticks, clock-step and last-success series).

The step reaches everything that reads the wall clock: the worker's ``clock``, the metrics' clock, and
APScheduler's (which older releases scheduled ticks with) when it is installed.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from standins.generate import Scenario
from standins.handles import LangfuseHandle, start_langfuse
from standins.langfuse_server import LangfuseOptions
from tests.support.worker import REFERENCES, agent_trace
from trace_scorer.config.settings import Settings
from trace_scorer.ops import Ops
from trace_scorer.ops.telemetry import Telemetry
from trace_scorer.worker.service import Worker, open_context

OFFSET = [timedelta(0)]


def wall() -> datetime:
    """The worker's wall clock: the real one, stepped by :data:`OFFSET`."""
    return datetime.now(UTC) + OFFSET[0]


class SteppedDatetime(datetime):
    """``datetime`` whose ``now`` is the stepped clock (for APScheduler, which calls ``datetime.now``)."""

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return (datetime.now(UTC) + OFFSET[0]).astimezone(tz)


def step_apscheduler() -> None:
    try:
        import apscheduler.schedulers.base as base
        import apscheduler.triggers.interval as interval
    except ImportError:
        return
    base.datetime = SteppedDatetime  # type: ignore[misc]
    interval.datetime = SteppedDatetime  # type: ignore[misc]


def settings(lf: LangfuseHandle, state: Path) -> Settings:
    return Settings(
        langfuse={"base_url": lf.url, "public_key": lf.public_key, "secret_key": SecretStr(lf.secret_key),
                  "retry": {"initial": 0.1, "max": 1.0}},
        state={"path": str(state)},
        http={"enabled": True, "port": 0},
        log={"level": "WARNING"},
        targets=[{
            "name": "agent", "source": "traces", "interval": 1, "lookback": "1h", "lag": "2s",
            "quiet_period": "1s", "references": REFERENCES,
            "metrics": [{"metric": "tool_call_accuracy"}, {"metric": "rouge"}],
        }],
    )


def endpoints(ops: Ops) -> str:
    """What the three endpoints answered (probes whole, the metrics' lines of interest)."""
    server = ops.server
    assert server is not None
    lines = []
    for path in ("/healthz", "/readyz"):
        answer = server._route(path, {})
        lines.append(f"    {path} {answer.status} {answer.body.decode()}")
    metrics = server._route("/metrics", {}).body.decode().splitlines()
    wanted = ("trace_scorer_ticks_total{", "trace_scorer_clock_steps_total{", "trace_scorer_last_successful_tick")
    lines += [f"    /metrics {m}" for m in metrics if m.startswith(wanted)]
    return "\n".join(lines)


def scored(lf: LangfuseHandle, ids: list[str]) -> int:
    done = {s["traceId"] for s in lf.scores()}
    return sum(1 for t in ids if t in done)


def add(lf: LangfuseHandle, prefix: str, count: int, start: datetime) -> list[str]:
    ids = [f"{prefix}-{n}" for n in range(count)]
    lf.add_traces(*(agent_trace(t, start + timedelta(milliseconds=50 * n), duration=1.0) for n, t in enumerate(ids)))
    return ids


def ok_ticks(ops: Ops) -> float:
    labels = {"target": "agent", "outcome": "ok"}
    return ops.telemetry.registry.get_sample_value("trace_scorer_ticks_total", labels) or 0


async def worker_running(config: Settings, timeline: Callable[[Ops, Any], Awaitable[None]]) -> None:
    """One worker (``trace-scorer run``) on ``config`` while ``timeline`` plays, then stopped."""
    async with AsyncExitStack() as stack:
        ops = Ops.from_settings(config.http, telemetry=Telemetry(clock=lambda: wall().timestamp()))
        context = await open_context(config, stack, ops=ops)
        worker = Worker(context, clock=wall)
        running = asyncio.create_task(worker.run())
        try:
            await timeline(ops, context)
        finally:
            worker.stop.set()
            await running


async def main() -> None:
    import trace_scorer

    print(f"trace_scorer from {Path(trace_scorer.__file__).parent}")
    step_apscheduler()
    lf = start_langfuse(LangfuseOptions(scenario=Scenario(traces=0, datasets=())), mode="thread")
    config = settings(lf, Path(tempfile.mkdtemp(prefix="clock-step-")) / "state.db")
    after: list[str] = []

    async def first_run(ops: Ops, context: Any) -> None:
        first = add(lf, "first", 3, datetime.now(UTC) - timedelta(minutes=1))
        await asyncio.sleep(3)
        print(f"right clock, 3 s: {scored(lf, first)}/3 scored, watermark {context.state.watermark('agent')}")
        OFFSET[0] = timedelta(hours=2)
        await asyncio.sleep(5)
        print(f"clock 2 h ahead for 5 s (real time {datetime.now(UTC):%H:%M:%S}): "
              f"watermark {context.state.watermark('agent')}, {ok_ticks(ops):.0f} ok ticks so far")
        print(endpoints(ops))
        OFFSET[0] = timedelta(0)
        after.extend(add(lf, "after", 20, datetime.now(UTC)))
        await asyncio.sleep(8)
        print(f"right again, 20 traces arrive, 8 s: {scored(lf, after)}/20 scored, "
              f"watermark {context.state.watermark('agent')}")
        print(endpoints(ops))

    async def second_run(ops: Ops, context: Any) -> None:
        await asyncio.sleep(5)
        print(f"after a restart on the same state, 5 s: {scored(lf, after)}/20 scored")
        OFFSET[0] = -timedelta(hours=1)
        late = add(lf, "late", 5, datetime.now(UTC))
        before = ok_ticks(ops)
        await asyncio.sleep(8)
        print(f"clock 1 h behind, 8 s at a 1 s interval: {ok_ticks(ops) - before:.0f} ticks, "
              f"{scored(lf, late)}/5 new traces scored")
        print(endpoints(ops))

    try:
        await worker_running(config, first_run)
        await worker_running(config, second_run)
    finally:
        lf.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

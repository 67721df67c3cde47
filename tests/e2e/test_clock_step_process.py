"""Issue #22, item 1, as an operator sees it: ``trace-scorer run`` as a process whose wall clock steps
(``standins/stepped_clock.py``: the real clock plus an offset the test writes to a file), against the
loopback Langfuse stand-in, which keeps the real time and dates its answers with it.

The clock goes 2 h ahead, then right again, and 20 traces arrive: all are scored. Then it goes 1 h
behind and 5 traces arrive: the ticks keep coming and they are scored. Each step is logged and counted.
The waits are for events (log lines, scores arriving), bounded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from standins.generate import Scenario
from standins.handles import LangfuseHandle, start_langfuse, wait_until
from standins.langfuse_server import LangfuseOptions
from standins.worker import WorkerProcess, production_target, worker_environment
from tests.support.worker import REFERENCES, agent_trace

WAIT = 60.0


@pytest.fixture
def langfuse() -> Iterator[LangfuseHandle]:
    options = LangfuseOptions(version="4.60.0", scenario=Scenario(traces=0, datasets=()))
    with start_langfuse(options, mode="thread") as lf:
        yield lf


def add(lf: LangfuseHandle, prefix: str, count: int, start: datetime) -> set[str]:
    ids = [f"{prefix}-{n}" for n in range(count)]
    lf.add_traces(*(agent_trace(t, start + timedelta(milliseconds=50 * n), duration=1.0) for n, t in enumerate(ids)))
    return set(ids)


def scored(lf: LangfuseHandle) -> set[str]:
    return {str(s["traceId"]) for s in lf.scores(name="tool_call_accuracy")}


@pytest.mark.slow
def test_a_stepped_worker_loses_no_trace_and_keeps_ticking(langfuse: LangfuseHandle, tmp_path: Path) -> None:
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    target = production_target(
        ["tool_call_accuracy"], name="agent", interval="1s", lag="1s", quiet_period="1s", lookback="30m",
        references=REFERENCES,
    )
    env = worker_environment(langfuse, targets=[target], extra={"STANDIN_CLOCK_OFFSET_FILE": str(offset)})
    env["TRACE_SCORER_HTTP"] = json.dumps({"enabled": False})

    def eventually(predicate: object, what: str) -> None:
        assert wait_until(predicate, timeout=WAIT, interval=0.1), f"{what}\n" + worker.log()[-4000:]

    def steps(direction: str) -> int:
        return sum(1 for e in worker.events("clock_step") if e["direction"] == direction)

    with WorkerProcess(["run"], env=env, workdir=tmp_path, module="standins.stepped_clock") as worker:
        first = add(langfuse, "first", 3, datetime.now(UTC) - timedelta(minutes=1))
        eventually(lambda: first <= scored(langfuse), "the first traces scored")

        offset.write_text(str(2 * 3600))  # 2 h ahead
        eventually(lambda: steps("forward") == 1, "the step forward seen")
        ticks = len(worker.events("tick"))
        eventually(lambda: len(worker.events("tick")) >= ticks + 3, "three ticks with the clock ahead")
        offset.write_text("0")  # right again
        eventually(lambda: steps("backward") == 1, "the step back seen")
        after = add(langfuse, "after", 20, datetime.now(UTC))
        eventually(lambda: after <= scored(langfuse), "the 20 traces that came after scored")

        offset.write_text(str(-3600))  # 1 h behind
        eventually(lambda: steps("backward") == 2, "the second step back seen")
        late = add(langfuse, "late", 5, datetime.now(UTC))
        ticks = len(worker.events("tick"))
        eventually(lambda: late <= scored(langfuse), "the 5 traces that came with the clock behind scored")
        eventually(lambda: len(worker.events("tick")) >= ticks + 3, "ticks keep coming with the clock behind")
        assert worker.terminate() == 0

    assert len(langfuse.scores(name="tool_call_accuracy")) == 28  # each trace once
    assert all(e["ok"] for e in worker.events("tick"))
    assert worker.events("clock_disagrees_with_langfuse")

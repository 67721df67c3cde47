"""Windows planned by count as well as by time (issue #22 item 7): a window holding more than
``max_window_traces`` traces ends at the first one beyond them, and the next window starts there — every
trace scored exactly once, whatever the ordering the server lists roots in (newest first on v4, oldest
first on legacy servers), and a tick never holds more than that many roots."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, traces_target

TRACES = 25


@pytest.mark.parametrize("server", ["v4", "v3"])
async def test_a_busy_window_is_scored_in_windows_of_max_window_traces_each_trace_once(
    harness: MakeHarness, clock: FakeClock, server: str, request: pytest.FixtureRequest
) -> None:
    langfuse: InProcessLangfuse = request.getfixturevalue(server)
    start = clock.now() - timedelta(minutes=50)
    rows = []
    for n in range(TRACES):
        rows += agent_trace(f"t{n:02d}", start + timedelta(minutes=n))
    # Two traces starting at the same instant as a third: a cut may fall between none of them.
    rows += agent_trace("tie-a", start + timedelta(minutes=10))
    rows += agent_trace("tie-b", start + timedelta(minutes=10))
    langfuse.add_rows(*rows)
    h = await harness(traces_target(max_window_traces=10))
    context = await h.open()

    seen_per_tick = []
    scored: Counter[str] = Counter()
    watermarks = []
    for _ in range(5):
        report = await h.tick(context)
        seen_per_tick.append(report.seen)
        scored[report.window] = report.scored
        watermarks.append(context.state.watermark("agent"))
        clock.elapsed += 1

    expected = {f"t{n:02d}" for n in range(TRACES)} | {"tie-a", "tie-b"}
    assert {s["traceId"] for s in langfuse.scores.values()} == expected
    assert sum(scored.values()) == len(expected)  # each trace scored once
    assert seen_per_tick == [10, 10, 7, 0, 0]  # no tick held more than max_window_traces roots of its window
    # The first window ended at the first trace beyond the ten earliest (t10 and both ties start there).
    assert watermarks[0] == start + timedelta(minutes=10)

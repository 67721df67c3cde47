"""The stand-in's traces made as they are served (issue #22): a trace with thousands more observations
(``wide_trace``) and one with a huge observation (``huge_row_trace``), paged in the server's order."""

from __future__ import annotations

from datetime import timedelta

from standins.generate import Scenario
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_inprocess import MakeLangfuse
from trace_scorer.langfuse import ApiGeneration, TimeWindow, TraceFilter
from trace_scorer.langfuse.reads.trace_scan import ANSWER_TOO_LARGE, OversizedTrace


def scenario(clock: FakeClock, **kw: object) -> Scenario:
    end = (clock.now() - timedelta(minutes=10)).isoformat()
    return Scenario(seed=3, traces=6, spacing=1.0, end=end, datasets=(), duplicate_rate=0.0, **kw)  # type: ignore[arg-type]


async def test_a_wide_trace_is_served_whole_in_order_across_pages(
    make_langfuse: MakeLangfuse, make_client: MakeClient, clock: FakeClock
) -> None:
    make_langfuse(scenario=scenario(clock, wide_trace=4, wide_rows=2_500))
    client = make_client(ApiGeneration.V4, page_size=1000, max_rows_per_trace=0)
    window = TimeWindow(clock.now() - timedelta(hours=1), clock.now())
    roots = [r async for r in client.reads.list_trace_roots(window, TraceFilter())]
    assert len(roots) == 6
    wide = roots[1]  # newest first: trace 4 of 0…5
    trace = await client.reads.fetch_trace(wide)
    ids = [row["id"] for row in trace.rows]
    assert len(ids) == len(set(ids)) > 2_500
    starts = [row["startTime"] for row in trace.rows]
    assert starts == sorted(starts)  # handed on oldest first, every page in the server's order


async def test_a_huge_row_skips_only_its_trace(
    make_langfuse: MakeLangfuse, make_client: MakeClient, clock: FakeClock
) -> None:
    standin = make_langfuse(scenario=scenario(clock, huge_row_trace=2, huge_row_bytes=300_000))
    client = make_client(ApiGeneration.V4, max_answer_bytes=100_000, per_trace_fetch_max=0)
    window = TimeWindow(clock.now() - timedelta(hours=1), clock.now())
    roots = [r async for r in client.reads.list_trace_roots(window, TraceFilter())]
    standin.calls.clear()
    got = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}
    skipped = [t for t in got.values() if isinstance(t, OversizedTrace)]
    assert [(t.trace_id, t.reason) for t in skipped] == [(roots[3].trace_id, ANSWER_TOO_LARGE)]
    assert all(got[r.trace_id].rows for r in roots if r.trace_id != roots[3].trace_id)
    # One window scan: its page asked again at 500, 250 … 1 row (10 answers over the cap), the row's core
    # fields alone, then whole pages past it — no trace read on its own, no trace but that one skipped.
    calls = standin.calls_to("GET", "/api/public/v2/observations")
    assert not any("traceId" in c.request.url.params for c in calls)
    assert [c.request.url.params["fields"] for c in calls].count("core") == 1
    assert len(calls) <= 16  # (a few pages of the rows before it come back whole on the way down)
    assert calls[-1].request.url.params["limit"] == "1000"

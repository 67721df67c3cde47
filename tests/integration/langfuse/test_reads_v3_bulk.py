"""Bulk reads of trace bodies on legacy (3.x, 2.x) servers: ``GET /observations`` over a batch's span
instead of one ``GET /traces/{id}`` per trace — the same rows and Samples, ≤ 10 reads per 100 traces.

On the Langfuse stand-in (real HTTP on loopback) in its 3.120 and 2.95 profiles, whose ``/observations``
pages by offset, 100 rows at most, reorders ``startTime`` ties between pages and (3.x) answers unmerged
duplicates."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from standins.formats import RowBuilder
from standins.handles import LangfuseHandle
from tests.support.langfuse_client import MakeClient
from tests.support.standins import END, StartLangfuse, small_scenario
from trace_scorer.extract import extract_sample
from trace_scorer.langfuse import LangfuseClient, TimeWindow, TraceFilter, TraceRoot
from trace_scorer.langfuse.reads.trace_scan import OversizedTrace
from trace_scorer.langfuse.types import TraceRows

END_TIME = datetime.fromisoformat(END)
WINDOW = TimeWindow(END_TIME - timedelta(hours=2), END_TIME + timedelta(hours=2))
READ_ROUTES = ("GET /api/public/traces", "GET /api/public/observations", "GET /api/public/traces/{traceId}")
#: Reads one trace at a time, whatever the batch.
ONE_BY_ONE = {"per_trace_fetch_max": 1_000_000}


def reads(handle: LangfuseHandle) -> dict[str, int]:
    return {route: handle.count(route) for route in READ_ROUTES}


async def roots_of(client: LangfuseClient) -> list[TraceRoot]:
    return [r async for r in client.reads.list_trace_roots(WINDOW, TraceFilter())]


async def bodies(client: LangfuseClient, roots: list[TraceRoot]) -> dict[str, TraceRows]:
    return {t.trace_id: t async for t in client.reads.fetch_traces(roots)}


def odd_traces() -> list[list[dict[str, Any]]]:
    """Traces whose observations a span read cannot vouch for: a tool call starting an hour after the
    trace ended (outside any batch's span); 150 tool calls started in one millisecond (the tie spans page
    boundaries, which offset paging reorders)."""

    def builder(trace_id: str, start: datetime) -> RowBuilder:
        return RowBuilder(
            trace_id, start, environment="production", user_id="u-9", session_id=None, tags=["odd"],
            release=None, trace_name="odd-agent",
        )  # fmt: skip

    outside = builder("a" * 32, END_TIME - timedelta(seconds=150))
    outside.obs("root", "SPAN", "odd-agent", 0, 10_000, input={"q": "refund order 7"}, output={"a": "refunded"})
    outside.obs("find", "TOOL", "find_order", 2_000, 400, parent="root", input={"order": 7}, output={"ok": 1})
    outside.obs("after", "TOOL", "refund", 3_600_000, 400, parent="root", input={"order": 7}, output={"ok": 1})
    tied = builder("b" * 32, END_TIME - timedelta(seconds=100))
    tied.obs("root", "SPAN", "odd-agent", 0, 8_000, input={"q": "look everything up"}, output={"a": "done"})
    for n in range(150):
        tied.obs(f"tool-{n}", "TOOL", "lookup", 1_000, 100 + n, parent="root", input={"n": n}, output={"ok": n})
    return [outside.rows, tied.rows]


@pytest.mark.parametrize("version", ["3.120.0", "2.95.12"])
async def test_bulk_reads_give_the_rows_and_samples_per_trace_reads_give(
    version: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    # Duplicates, late rows (some still not visible), hostile payloads, second roots, traces still running
    # when the server is read (its clock stops 20 s before the backlog's end), plus the odd traces above.
    scenario = small_scenario(
        traces=150,
        spacing=2.0,
        duplicate_rate=0.3,
        hostile_rate=0.2,
        huge_bytes=30_000,
        late_rate=0.2,
        late_delay=120.0,
        multi_root_rate=0.1,
        datasets=(),
    )
    lf = start_lf(version=version, scenario=scenario, clock=lambda: END_TIME - timedelta(seconds=20))
    lf.add_traces(*odd_traces())
    bulk, one_by_one = client_for(lf), client_for(lf, **ONE_BY_ONE)
    await bulk.connect()
    await one_by_one.connect()
    roots = await roots_of(bulk)
    assert len(roots) > 140 and any(r.end_time is None for r in roots)  # some still running
    before = reads(lf)
    bulk_traces = await bodies(bulk, roots)
    bulk_reads = {route: n - before[route] for route, n in reads(lf).items()}
    per_trace = await bodies(one_by_one, roots)
    assert set(bulk_traces) == set(per_trace) == {r.trace_id for r in roots}
    for trace_id, trace in per_trace.items():
        assert bulk_traces[trace_id].rows == trace.rows, trace_id
        assert extract_sample(bulk_traces[trace_id].rows, trace_id=trace_id) == extract_sample(
            trace.rows, trace_id=trace_id
        )
    # The odd traces were read on their own; everything else came from the span's pages.
    assert bulk.reads.bulk_fallbacks >= 2  # type: ignore[attr-defined]
    assert bulk_reads["GET /api/public/traces/{traceId}"] == bulk.reads.bulk_fallbacks  # type: ignore[attr-defined]
    assert bulk_reads["GET /api/public/traces/{traceId}"] <= 10
    assert 0 < bulk_reads["GET /api/public/observations"] < len(roots) / 10


async def test_reads_per_100_production_traces(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    """What ``bench/bench_worker.py`` measures on v3, at the adapter: list the window, read the bodies."""
    scenario = small_scenario(traces=300, spacing=1.0, duplicate_rate=0.2, references_rate=1.0, datasets=())
    lf = start_lf(version="3.120.0", scenario=scenario)
    figures = {}
    for name, settings in (("bulk", {}), ("one by one", ONE_BY_ONE)):
        client = client_for(lf, **settings)
        await client.connect()
        before = sum(reads(lf).values())
        roots = await roots_of(client)
        traces = await bodies(client, roots)
        assert len(traces) == 300 and all(t.rows for t in traces.values())
        figures[name] = (sum(reads(lf).values()) - before) * 100 / len(roots)
    assert figures["bulk"] <= 10  # the target
    assert figures["one by one"] > 100  # one request per trace, plus the listing


async def test_the_row_cap_holds_both_ways(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    lf = start_lf(version="3.120.0", scenario=small_scenario(traces=30, datasets=()))
    lf.add_traces(*odd_traces())
    cap = {"max_rows_per_trace": 20}
    bulk, one_by_one = client_for(lf, **cap), client_for(lf, **cap, **ONE_BY_ONE)
    await bulk.connect()
    await one_by_one.connect()
    roots = await roots_of(bulk)
    before = reads(lf)
    bulk_traces = await bodies(bulk, roots)
    tied_reads = reads(lf)["GET /api/public/traces/{traceId}"] - before["GET /api/public/traces/{traceId}"]
    per_trace = await bodies(one_by_one, roots)
    oversized = {t for t, trace in per_trace.items() if isinstance(trace, OversizedTrace)}
    assert oversized == {"b" * 32}
    assert bulk_traces == per_trace  # the same OversizedTrace (rows_read 151, limit 20) and the same rows
    assert per_trace["b" * 32] == OversizedTrace("b" * 32, [], rows_read=151, limit=20)
    assert tied_reads == 1  # the trace outside its span; the oversized one is known from the listing


async def test_a_server_ignoring_to_start_time_gets_per_trace_reads(
    start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    """A 2.x from before ``toStartTime`` would answer the whole project newest first: the first page shows
    it, and trace bodies are read one by one from then on (one wasted request, not a scan of everything)."""
    scenario = small_scenario(traces=40, datasets=())
    lf = start_lf(version="2.95.12", scenario=scenario, observations_without_to_start_time=True)
    bulk, one_by_one = client_for(lf), client_for(lf, **ONE_BY_ONE)
    await bulk.connect()
    await one_by_one.connect()
    roots = await roots_of(bulk)
    early = [r for r in roots if r.start_time < END_TIME - timedelta(seconds=80)]
    before = reads(lf)
    first = await bodies(bulk, early)
    second = await bodies(bulk, roots)
    after = reads(lf)
    assert after["GET /api/public/observations"] - before["GET /api/public/observations"] == 1
    assert after["GET /api/public/traces/{traceId}"] - before["GET /api/public/traces/{traceId}"] == len(early) + len(
        roots
    )
    per_trace = await bodies(one_by_one, roots)
    assert first == {t: per_trace[t] for t in first} and second == per_trace

"""A trace with more observations than ``[langfuse] max_rows_per_trace`` (issue #13): skipped with a reason,
logged once, recorded as done; the rest of its window is scored and its reads stop early."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from standins.http import Request
from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_factories import Reply
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import Harness, MakeHarness, agent_trace
from trace_scorer.langfuse import LangfuseClient
from trace_scorer.langfuse.reads.trace_scan import ANSWER_TOO_LARGE, TOO_MANY_ROWS
from trace_scorer.ops import Health, Ops
from trace_scorer.worker.service import open_context
from trace_scorer.worker.traces import FIELD_TOO_LARGE

OBS = ("GET", "/api/public/v2/observations")


def body_reads(v4: InProcessLangfuse) -> int:
    """Observation requests for traces' rows (not for the roots of the window, which ask for their trace's
    name and tags too: ``trace_context``)."""
    return sum("trace_context" not in c.request.url.params.get("fields", "") for c in v4.calls_to(*OBS))


def big_trace(trace_id: str, start: datetime) -> list[dict[str, Any]]:
    """An agent run with 400 more steps: 403 observations."""
    steps = [
        f.observation(
            f"{trace_id}-span{n}",
            trace_id,
            start + timedelta(seconds=1 + n),
            end=start + timedelta(seconds=1.5 + n),
            parent=f"{trace_id}-root",
            name="step",
        )
        for n in range(400)
    ]
    return agent_trace(trace_id, start, duration=420) + steps


async def capped(harness: MakeHarness) -> Harness:
    h = await harness()
    lf = h.settings.langfuse.model_copy(update={"max_rows_per_trace": 100, "page_size": 50, "trace_slack": 10.0})
    h.settings = h.settings.model_copy(update={"langfuse": lf})
    return h


async def test_a_trace_over_the_row_cap_is_skipped_and_the_rest_of_the_window_scored(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    now = clock.now()
    rows = big_trace("big", now - timedelta(minutes=40))
    for n, trace_id in enumerate(["t1", "t2"]):
        rows += agent_trace(trace_id, now - timedelta(minutes=30) + timedelta(seconds=n))
    v4.add_rows(*rows)
    pages_in_window = -(-len(rows) // 50)

    h = await capped(harness)
    context = await h.open()
    v4.calls.clear()
    with capture_logs() as logs:
        report = await h.tick(context)

    assert report.scored == 2 and report.failed == 0
    assert report.skipped[TOO_MANY_ROWS] == 1
    assert {s["traceId"] for s in v4.scores.values()} == {"t1", "t2"}
    skipped = [e for e in logs if e["event"] == "trace_skipped"]
    assert len(skipped) == 1
    assert skipped[0]["trace_id"] == "big" and skipped[0]["rows_read"] > 100 and skipped[0]["max_rows_per_trace"] == 100
    assert skipped[0]["reason"] == TOO_MANY_ROWS
    # The scan stopped once the big trace was over the cap and the others were complete.
    assert body_reads(v4) == 3 < pages_in_window
    assert context.state.done_reason("agent", "big") == TOO_MANY_ROWS
    assert context.state.done_reason("agent", "t1") is None

    # Recorded as done: the next ticks do not read it again (nor log it again).
    v4.calls.clear()
    clock.elapsed += 600
    with capture_logs() as logs:
        report = await h.tick(context)
    assert body_reads(v4) == 0
    assert TOO_MANY_ROWS not in report.skipped
    assert not [e for e in logs if e["event"] == "trace_skipped"]


async def test_a_single_trace_over_the_cap_stops_its_own_fetch_early(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(minutes=30)
    v4.add_rows(*big_trace("big", start), *agent_trace("t1", start + timedelta(seconds=5)))
    h = await capped(harness)  # two traces: one request each (traceId=…)
    context = await h.open()
    v4.calls.clear()
    report = await h.tick(context)
    assert report.scored == 1 and report.skipped[TOO_MANY_ROWS] == 1
    big_reads = [c for c in v4.calls_to(*OBS) if c.request.url.params.get("traceId") == "big"]
    assert len(big_reads) == 3  # 150 rows read of 403, then reading stopped
    assert context.state.done_reason("agent", "big") == TOO_MANY_ROWS


async def test_a_big_trace_read_first_does_not_stall_its_window_nor_liveness(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    # Issue #22 item 2: the big trace is the newest, so a scan meets its rows first. Its rows past the cap
    # are not read; the other traces (beside it and before it) are scored; every page read counts as
    # progress, so /healthz holds while pages come (each page takes 1.5 s here, the liveness limit is 2 s).
    now = clock.now()
    rows = big_trace("big", now - timedelta(minutes=20))
    others = ["b0", "b1", "o0", "o1", "o2"]
    starts = [timedelta(minutes=19), timedelta(minutes=18), *(timedelta(minutes=50 - n) for n in range(3))]
    for trace_id, ago in zip(others, starts, strict=True):
        rows += agent_trace(trace_id, now - ago)
    v4.add_rows(*rows)
    pages_in_window = -(-len(rows) // 50)

    h = await capped(harness)
    h.settings = h.settings.model_copy(
        update={"targets": [h.settings.targets[0].model_copy(update={"interval": 1.0})]}
    )
    moment = [0.0]
    health = Health(clock=lambda: moment[0], liveness_intervals=2, liveness_min=0)
    client = LangfuseClient(h.settings.langfuse, clock=clock)
    h.stack.push_async_callback(client.aclose)
    ops = Ops.from_settings(h.settings.http, health=health)
    context = await open_context(h.settings, h.stack, ops=ops, client=client)
    alive: list[bool] = []

    async def slow_page(request: Request, params: dict[str, str]) -> Reply:
        alive.append(health.liveness().ok)  # what /healthz says while this page is on its way
        moment[0] += 1.5
        return await v4.standin_answer(request)

    v4.on(*OBS, slow_page)
    v4.calls.clear()
    async with ops.tick("agent", 1.0):  # as the worker ticks: the transport's signs of life reach liveness
        report = await h.tick(context)

    assert report.scored == len(others) and report.skipped[TOO_MANY_ROWS] == 1
    assert {s["traceId"] for s in v4.scores.values()} == set(others)
    assert alive and all(alive), alive
    # 2 pages until the big trace is over the cap (its root came with the listing: 1 + 100 rows), one
    # request for each trace beside it, one page for the older ones — not the window's every page.
    assert body_reads(v4) == 5 < pages_in_window


def with_limits(h: Harness, **langfuse: Any) -> Harness:
    h.settings = h.settings.model_copy(update={"langfuse": h.settings.langfuse.model_copy(update=langfuse)})
    return h


def logged_file(trace_id: str, start: datetime, size: int, *, in_root: bool = False) -> list[dict[str, Any]]:
    """An agent run that logged a whole file of ``size`` characters: in a tool's output, or in its root's input."""
    rows = agent_trace(trace_id, start)
    text = "x" * size
    if in_root:
        rows[0] = dict(rows[0], input=json.dumps({"messages": [{"role": "user", "content": text}]}))
    else:
        rows.append(
            f.observation(
                f"{trace_id}-read", trace_id, start + timedelta(seconds=2), end=start + timedelta(seconds=3),
                parent=f"{trace_id}-root", type="TOOL", name="read_file", output=text,
            )
        )
    return rows


@pytest.mark.parametrize("in_root", [False, True], ids=["in-a-tool", "in-the-root"])
async def test_a_row_too_large_for_an_answer_skips_only_its_trace(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock, in_root: bool
) -> None:
    # Issue #22 item 8: one observation of 300 kB, answers capped at 100 kB. Pages are asked again with
    # fewer rows down to one; that row's trace is skipped with the reason, its window is scored.
    now = clock.now()
    rows = logged_file("huge", now - timedelta(minutes=30), 300_000, in_root=in_root)
    for n in range(4):
        rows += agent_trace(f"t{n}", now - timedelta(minutes=31) + timedelta(seconds=20 * n))
    v4.add_rows(*rows)
    h = with_limits(await harness(), max_answer_bytes=100_000, page_size=50, trace_slack=10.0)
    context = await h.open()
    with capture_logs() as logs:
        report = await h.tick(context)

    assert report.scored == 4 and report.failed == 0
    assert report.skipped[ANSWER_TOO_LARGE] == 1
    assert {s["traceId"] for s in v4.scores.values()} == {f"t{n}" for n in range(4)}
    skipped = [e for e in logs if e["event"] == "trace_skipped"]
    assert [(e["trace_id"], e["reason"], e["max_answer_bytes"]) for e in skipped] == [
        ("huge", ANSWER_TOO_LARGE, 100_000)
    ]
    assert context.state.done_reason("agent", "huge") == ANSWER_TOO_LARGE
    assert "1" in {c.request.url.params["limit"] for c in v4.calls_to(*OBS)}  # asked down to one row
    # The watermark moved past the window: it is not read again.
    clock.elapsed += 600
    v4.calls.clear()
    report = await h.tick(context)
    assert body_reads(v4) == 0 and ANSWER_TOO_LARGE not in report.skipped


async def test_a_field_over_the_field_cap_skips_its_trace(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    now = clock.now()
    v4.add_rows(
        *logged_file("huge", now - timedelta(minutes=30), 20_000),
        *agent_trace("t1", now - timedelta(minutes=29)),
        *agent_trace("t2", now - timedelta(minutes=28)),
    )
    h = with_limits(await harness(), max_field_chars=10_000)
    context = await h.open()
    with capture_logs() as logs:
        report = await h.tick(context)
    assert report.scored == 2 and report.skipped[FIELD_TOO_LARGE] == 1
    assert {s["traceId"] for s in v4.scores.values()} == {"t1", "t2"}
    (skipped,) = [e for e in logs if e["event"] == "trace_skipped"]
    assert skipped["trace_id"] == "huge" and skipped["field"] == "huge-read.output"
    assert context.state.done_reason("agent", "huge") == FIELD_TOO_LARGE

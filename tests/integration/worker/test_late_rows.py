"""Issue #29 on Langfuse v4, late children: a trace scored before one of its rows was visible is read once
more after the horizon and scored again when its rows changed — the same score ids (an overwrite, never a
duplicate); a trace whose rows did not change is read again once and posted once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import Harness, MakeHarness, agent_trace, traces_target
from trace_scorer.worker.late_rows import RECHECK_WAIT
from trace_scorer.worker.service import Context
from trace_scorer.worker.traces import FRESH_MARGIN

OBSERVATIONS = "/api/public/v2/observations"


def scores_of(v4: InProcessLangfuse, trace_id: str) -> dict[str, tuple[str, Any]]:
    """Score name → (id, value) stored for the trace."""
    return {s["name"]: (s["id"], s["value"]) for s in v4.scores.values() if s["traceId"] == trace_id}


def posts_of(v4: InProcessLangfuse, trace_id: str) -> int:
    """How many scores of the trace were sent (every post, overwrites included)."""
    sent = [s for post in v4.score_posts for s in post] + [e["body"] for e in v4.events]
    return sum(1 for s in sent if s.get("traceId") == trace_id)


def reads_of(v4: InProcessLangfuse, trace_id: str) -> int:
    """Observation reads that asked for this trace's rows by id (``traceId=`` or ``traceId any of``)."""
    count = 0
    for call in v4.calls_to("GET", OBSERVATIONS):
        params = call.request.url.params
        conditions = json.loads(params.get("filter", "[]"))
        ids = [c["value"] for c in conditions if c["column"] == "traceId"]
        if params.get("traceId") == trace_id or any(trace_id in v for v in ids):
            count += 1
    return count


async def listed(harness: MakeHarness) -> tuple[Harness, Context]:
    """A worker on the production timing defaults that made its first, complete listing."""
    h = await harness(traces_target(interval="12s", lag="2m", quiet_period="10s"))
    context = await h.open()
    await h.tick(context)
    return h, context


async def ticks(h: Harness, context: Context, clock: FakeClock, n: int = 10) -> None:
    """``n`` more ticks, 12 s apart."""
    for _ in range(n):
        clock.elapsed += 12
        await h.tick(context)


async def test_a_child_visible_after_its_trace_was_scored_is_scored_again_with_the_same_score_ids(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h, context = await listed(harness)

    # Both ended 15 s ago (past the quiet period); one trace's tool call is not visible yet.
    start = clock.now() - timedelta(seconds=20)
    root, *late = agent_trace("t-late", start)
    v4.add_rows(root, *agent_trace("t-ok", start))
    clock.elapsed += 1
    report = await h.tick(context)
    assert report.scored == 2
    before = scores_of(v4, "t-late")
    assert before["tool_call_accuracy"][1] == 0.0  # scored without the call: the only one it had

    v4.add_rows(*late)  # the late children: the generation calling the tool, the tool's run
    # Read again once the horizon (the listing's margin) after the root's end has passed and the earliest
    # due re-check has waited for others: not before.
    ended = start + timedelta(seconds=5)
    while clock.now() < ended + timedelta(seconds=FRESH_MARGIN + RECHECK_WAIT):
        assert scores_of(v4, "t-late") == before
        clock.elapsed += 12
        report = await h.tick(context)

    after = scores_of(v4, "t-late")
    assert after["tool_call_accuracy"][1] == 1.0  # the late call is scored now
    assert {name: i for name, (i, _) in after.items()} == {name: i for name, (i, _) in before.items()}
    assert report.scored == 1  # only the trace whose rows changed
    assert len(v4.scores) == 8  # two traces, four scores each: overwritten, none twice
    assert posts_of(v4, "t-ok") == 4 and posts_of(v4, "t-late") == 8

    # Each trace is read again once: later ticks neither read nor post them again.
    reads = reads_of(v4, "t-ok"), reads_of(v4, "t-late")
    await ticks(h, context, clock)
    assert (reads_of(v4, "t-ok"), reads_of(v4, "t-late")) == reads
    assert posts_of(v4, "t-ok") == 4 and posts_of(v4, "t-late") == 8


async def test_a_second_root_visible_after_its_trace_was_scored_is_read_again_with_the_trace(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    """The re-check reads a trace's children only (the listing read its roots), so a second parentless
    span that comes late is seen by a later listing: its trace's re-check then reads the roots too, and
    the trace is scored again (the same score ids)."""
    h, context = await listed(harness)
    start = clock.now() - timedelta(seconds=20)
    # Three traces: more than ``per_trace_fetch_max``, so they are read by ``traceId any of``.
    v4.add_rows(*agent_trace("t-two", start), *agent_trace("t-one", start), *agent_trace("t-three", start))
    clock.elapsed += 1
    assert (await h.tick(context)).scored == 3
    before = scores_of(v4, "t-two")

    second = f.observation(
        "t-two-second", "t-two", start + timedelta(seconds=1), end=start + timedelta(seconds=4), root=True, name="extra"
    )
    v4.add_rows(second)
    await ticks(h, context, clock, n=8)
    assert posts_of(v4, "t-two") == 8 and posts_of(v4, "t-one") == 4  # scored again; the others only once
    assert {name: i for name, (i, _) in scores_of(v4, "t-two").items()} == {name: i for name, (i, _) in before.items()}
    assert len(v4.scores) == 12
    checks = [c for c in id_reads(v4) if "t-one" in c]
    assert len(checks) == 2  # scored, then read again once


async def test_a_trace_scored_after_the_horizon_is_not_read_again(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h, context = await listed(harness)
    # Visible only now, 60 s after its end (past the 30 s horizon): all its rows had time to come.
    v4.add_rows(*agent_trace("t-old", clock.now() - timedelta(seconds=65)))
    clock.elapsed += 120  # a sweep lists it
    report = await h.tick(context)
    assert report.scored == 1
    reads = reads_of(v4, "t-old")
    await ticks(h, context, clock)
    assert reads_of(v4, "t-old") == reads and posts_of(v4, "t-old") == 4


async def test_after_a_restart_a_trace_scored_within_the_horizon_is_scored_again_once(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h, first = await listed(harness)
    start = clock.now() - timedelta(seconds=20)
    root, *late = agent_trace("t-late", start)
    v4.add_rows(root)
    clock.elapsed += 1
    assert (await h.tick(first)).scored == 1
    before = scores_of(v4, "t-late")
    first.state.close()  # the process stops before the horizon; its children come while it is down

    v4.add_rows(*late)
    clock.elapsed += 5
    restarted = await h.open()
    report = await h.tick(restarted)
    assert report.scored == 0  # done, says the ledger
    ended = start + timedelta(seconds=5)
    while clock.now() < ended + timedelta(seconds=FRESH_MARGIN + RECHECK_WAIT):
        clock.elapsed += 12
        await h.tick(restarted)
    after = scores_of(v4, "t-late")
    assert before["tool_call_accuracy"][1] == 0.0 and after["tool_call_accuracy"][1] == 1.0
    assert {name: i for name, (i, _) in after.items()} == {name: i for name, (i, _) in before.items()}
    await ticks(h, restarted, clock)
    assert posts_of(v4, "t-late") == 8  # once by each process: an overwrite


def id_reads(v4: InProcessLangfuse) -> list[list[str]]:
    """The trace ids of each observation read by id so far (``traceId any of``, or ``traceId=``)."""
    out = []
    for call in v4.calls_to("GET", OBSERVATIONS):
        params = call.request.url.params
        conditions = json.loads(params.get("filter", "[]"))
        ids = [v for c in conditions if c["column"] == "traceId" for v in c["value"]]
        if params.get("traceId"):
            ids.append(params["traceId"])
        if ids:
            out.append(ids)
    return out


async def test_due_re_checks_ride_in_the_new_traces_read_and_only_a_changed_trace_is_scored_again(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h, context = await listed(harness)
    start = clock.now() - timedelta(seconds=20)
    root, *late = agent_trace("t-late", start)
    v4.add_rows(root, *agent_trace("t-ok", start))
    clock.elapsed += 1
    assert (await h.tick(context)).scored == 2
    before = scores_of(v4, "t-late")
    v4.add_rows(*late)

    # 12 s on: not due yet (the horizon is 30 s after the end), nothing read by id.
    reads = len(id_reads(v4))
    clock.elapsed += 12
    assert (await h.tick(context)).scored == 0
    assert len(id_reads(v4)) == reads

    # 12 s more: both are due (not for RECHECK_WAIT yet) and a new trace is ready: one read carries all three.
    v4.add_rows(*agent_trace("t-new", clock.now() - timedelta(seconds=8)))
    clock.elapsed += 12
    report = await h.tick(context)
    assert [sorted(ids) for ids in id_reads(v4)[reads:]] == [["t-late", "t-new", "t-ok"]]
    assert report.scored == 2  # the new trace, and the trace whose rows changed
    after = scores_of(v4, "t-late")
    assert after["tool_call_accuracy"][1] == 1.0 and before["tool_call_accuracy"][1] == 0.0
    assert {name: i for name, (i, _) in after.items()} == {name: i for name, (i, _) in before.items()}
    assert (posts_of(v4, "t-ok"), posts_of(v4, "t-late"), posts_of(v4, "t-new")) == (4, 8, 4)

    # Neither is read again later (the new trace once, at its own horizon, with nothing new).
    await ticks(h, context, clock)
    assert sum("t-ok" in ids or "t-late" in ids for ids in id_reads(v4)[reads:]) == 1
    assert sum("t-new" in ids for ids in id_reads(v4)[reads:]) == 2
    assert (posts_of(v4, "t-ok"), posts_of(v4, "t-late"), posts_of(v4, "t-new")) == (4, 8, 4)
    assert len(v4.scores) == 12


async def test_due_re_checks_that_would_part_fill_a_read_wait_for_a_tick_with_new_traces(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h, context = await listed(harness)
    start = clock.now() - timedelta(seconds=20)
    v4.add_rows(*agent_trace("t-ok", start))
    clock.elapsed += 1
    assert (await h.tick(context)).scored == 1
    reads = len(id_reads(v4))
    ended = start + timedelta(seconds=5)
    # Due from 30 s after its end; alone, it waits up to RECHECK_WAIT more for others to share its read.
    while clock.now() + timedelta(seconds=12) < ended + timedelta(seconds=FRESH_MARGIN + RECHECK_WAIT):
        clock.elapsed += 12
        await h.tick(context)
        assert len(id_reads(v4)) == reads
    await ticks(h, context, clock, 2)
    assert id_reads(v4)[reads:] == [["t-ok"]]

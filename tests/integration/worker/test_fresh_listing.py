"""Issue #29 on Langfuse v4: a tick lists roots up to now, and after the first complete listing only those
that ended since the previous one (minus a margin); once every ``lag`` a sweep reaches further back, so a
root that became visible late is still scored, exactly once."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace, traces_target
from trace_scorer.worker.traces import FRESH_MARGIN

ROOTS = "/api/public/v2/observations"


def root_listings(v4: InProcessLangfuse) -> list[dict[str, Any]]:
    """The structured filters of the root listings, in order."""
    out = []
    for call in v4.calls_to("GET", ROOTS):
        params = call.request.url.params
        if params.get("isRootObservation") == "true":
            out.append({c["column"] + c["operator"]: c["value"] for c in json.loads(params.get("filter", "[]"))})
    return out


def ended_since(listing: dict[str, Any]) -> datetime | None:
    value = listing.get("endTime>=")
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def scored(v4: InProcessLangfuse) -> dict[str, int]:
    """Trace id → scores stored for it."""
    out: dict[str, int] = {}
    for score in v4.scores.values():
        out[score["traceId"]] = out.get(score["traceId"], 0) + 1
    return out


async def test_a_fresh_trace_is_scored_on_the_first_tick_after_its_quiet_period(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h = await harness(traces_target(interval="12s", lag="2m", quiet_period="10s"))
    context = await h.open()
    await h.tick(context)  # nothing yet: the first, complete listing
    first = clock.now()

    # Ended 3 s ago, started 8 s before: inside `lag` (a window ending at now - lag would not reach it).
    v4.add_rows(*agent_trace("t-new", clock.now() - timedelta(seconds=8), duration=5))
    clock.elapsed += 5
    report = await h.tick(context)
    assert report.deferred == 1 and "t-new" not in scored(v4)  # 3 + 5 = 8 s after its end: still quiet
    clock.elapsed += 12
    report = await h.tick(context)
    assert report.scored == 1 and scored(v4) == {"t-new": 4}

    listings = root_listings(v4)
    assert ended_since(listings[0]) is None  # the first listing reads the whole window
    # Later ones: only what ended since the previous listing, minus the margin.
    assert ended_since(listings[1]) == first - timedelta(seconds=FRESH_MARGIN)


async def test_a_root_visible_after_a_later_listing_is_scored_by_the_sweep_and_widens_the_margin(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    h = await harness(traces_target(interval="12s", lag="2m", quiet_period="10s"))
    context = await h.open()
    await h.tick(context)
    listed = clock.now()
    # It ended 100 s before that listing but is only visible now (ingestion 100 s late: beyond the margin).
    v4.add_rows(*agent_trace("t-late", listed - timedelta(seconds=110), duration=10))
    clock.elapsed += 12
    report = await h.tick(context)
    assert report.seen == 0 and "t-late" not in scored(v4)  # the fast listing does not reach back 100 s

    clock.elapsed += 108  # `lag` (2 min) since the first listing: a sweep
    report = await h.tick(context)
    assert report.scored == 1 and scored(v4) == {"t-late": 4}
    sweep = root_listings(v4)[-1]
    assert ended_since(sweep) == listed - timedelta(seconds=120)

    # It came 100 s late after the listing before it: the margin is now 1.5 times that (within `lag`).
    clock.elapsed += 12
    await h.tick(context)
    previous = clock.now() - timedelta(seconds=12)
    assert ended_since(root_listings(v4)[-1]) == previous - timedelta(seconds=120)  # 150 s, capped at lag

    # Nothing is posted twice, however often a trace is listed again within the margin.
    for _ in range(12):
        clock.elapsed += 12
        await h.tick(context)
    assert scored(v4) == {"t-late": 4}


async def test_a_restart_lists_the_whole_window_again_and_posts_nothing_twice(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    target = traces_target(interval="12s", lag="2m", quiet_period="10s")
    h = await harness(target)
    first = await h.open()
    v4.add_rows(*agent_trace("t1", clock.now() - timedelta(minutes=5)))
    await h.tick(first)
    clock.elapsed += 12
    await h.tick(first)
    assert scored(v4) == {"t1": 4}
    first.state.close()
    # While the worker is down, a trace ends (visible late, 90 s after its end).
    v4.add_rows(*agent_trace("t2", clock.now() - timedelta(seconds=100), duration=5))
    clock.elapsed += 30
    restarted = await h.open()
    report = await h.tick(restarted)
    assert ended_since(root_listings(v4)[-1]) is None
    assert report.scored == 1 and scored(v4) == {"t1": 4, "t2": 4}

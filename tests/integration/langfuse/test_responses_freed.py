"""What the client has read is freed as soon as it is dropped: httpx ties each response to its body stream
in a reference cycle, so without the client breaking it every page of observations (up to megabytes) waited
for the cyclic garbage collector, and the worker's memory depended on when that ran."""

from __future__ import annotations

import gc
import weakref

import httpx

from tests.support import langfuse_factories as f
from tests.support.clocks import FakeClock
from tests.support.langfuse_client import make_settings
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import InProcessLangfuse
from trace_scorer.langfuse import ApiGeneration, LangfuseClient, ServerCapabilities, TimeWindow, TraceFilter
from trace_scorer.langfuse.http.endpoints import HEALTH


async def test_pages_and_answers_are_freed_without_the_cyclic_garbage_collector(
    v4: InProcessLangfuse, clock: FakeClock
) -> None:
    v4.add_rows(*(f.observation(f"r{i}", f"t{i}", at(i), end=at(i + 1), root=True) for i in range(3)))
    read: list[weakref.ref[httpx.Response]] = []

    async def keep(response: httpx.Response) -> None:
        read.append(weakref.ref(response))

    http = httpx.AsyncClient(event_hooks={"response": [keep]})
    client = LangfuseClient(make_settings(page_size=2), clock=clock, http=http)
    client.use_generation(ApiGeneration.V4, ServerCapabilities.from_version("4.60.0"))
    gc.collect()
    gc.disable()
    try:
        window = TimeWindow(at(0), at(60))
        roots = [r.trace_id async for r in client.reads.list_trace_roots(window, TraceFilter())]
        health = await client.transport.plain(HEALTH, "/api/public/health")
        alive = [ref() for ref in read if ref() is not None]
    finally:
        gc.enable()
        await client.aclose()
        await http.aclose()
    assert sorted(roots) == ["t0", "t1", "t2"] and health.body["status"] == "OK"
    assert len(read) >= 3  # two pages of roots and the health check
    assert alive == []

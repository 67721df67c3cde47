"""v3 (legacy) reads: traces list and trace bodies as v4-shaped rows, dataset runs, run items, item cache."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.langfuse import ApiGeneration, Dataset, TimeWindow, TraceFilter, TraceRoot

TRACES = ("GET", "/api/public/traces")
WINDOW = TimeWindow(at(0), at(3600))


def trace(
    trace_id: str, start: float, *observations: dict[str, Any], latency: float | None = 1.5, **kw: Any
) -> list[dict[str, Any]]:
    """A trace as a v3 server holds it: its root span (the trace's name, times, I/O, metadata, tags) and the
    observations under it."""
    end = None if latency is None else at(start + latency)
    kw.setdefault("trace_name", "agent")
    span = f.observation(f"{trace_id}-span", trace_id, at(start), end=end, name=kw["trace_name"], **kw)
    return [span, *observations]


async def roots_of(client: Any, trace_filter: TraceFilter | None = None) -> list[TraceRoot]:
    return [r async for r in client.reads.list_trace_roots(WINDOW, trace_filter or TraceFilter())]


async def test_traces_are_page_paged_oldest_first_and_become_root_rows(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    for n in range(5):
        v3.add_rows(
            *trace(
                f"t{n}",
                100 * n,
                input={"q": n},
                output=f"answer {n}",
                latency=2.5,
                metadata={"tenant": "acme"},
                tags=["support"],
                user_id="u1",
            )
        )
    v3.add_rows(*trace("late", 4000))
    client = make_client(ApiGeneration.V3, page_size=2)
    roots = await roots_of(client)
    assert [r.trace_id for r in roots] == ["t0", "t1", "t2", "t3", "t4"]
    assert len(v3.calls_to(*TRACES)) == 3  # 5 traces, 2 a page
    t1 = roots[1]
    assert (t1.observation_id, t1.name, t1.start_time, t1.end_time) == ("t-t1", "agent", at(100), at(102.5))
    assert (t1.environment, t1.user_id, t1.tags, t1.metadata) == (
        "production",
        "u1",
        ("support",),
        {"tenant": "acme"},
    )
    row = t1.row
    assert row["isRootObservation"] is True and row["parentObservationId"] is None and row["type"] == "SPAN"
    assert json.loads(row["input"]) == {"q": 1} and row["output"] == "answer 1"  # raw strings, as v4 rows
    params = v3.calls_to(*TRACES)[0].request.url.params
    assert params["orderBy"] == "timestamp.asc" and params["fields"] == "core,io,observations,metrics"


async def test_v3_trace_without_latency_has_no_end_time(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    v3.add_rows(*trace("t1", 10, latency=None))
    (only,) = await roots_of(make_client(ApiGeneration.V3))
    assert only.end_time is None


async def test_trace_filters_use_simple_params_and_a_json_filter_where_needed(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    wanted: dict[str, Any] = {"trace_name": "bot", "tags": ["a", "b"], "metadata": {"tier": "gold"}, "user_id": "u"}
    v3.add_rows(
        *trace("keep", 1, **wanted),
        *trace("dev", 2, **wanted, environment="dev"),
        *trace("silver", 3, **{**wanted, "metadata": {"tier": "silver"}}),
        *trace("one-tag", 4, **{**wanted, "tags": ["a"]}),
    )
    trace_filter = TraceFilter(
        exclude_environments=("dev",),
        tags=("a", "b"),
        metadata={"tier": "gold"},
        trace_name="bot",
        user_id="u",
    )
    roots = await roots_of(make_client(ApiGeneration.V3), trace_filter)
    assert [r.trace_id for r in roots] == ["keep"]
    params = v3.calls_to(*TRACES)[0].request.url.params
    assert params.get_list("tags") == ["a", "b"] and params["name"] == "bot"
    conditions = json.loads(params["filter"])
    assert {
        "type": "stringOptions",
        "column": "environment",
        "operator": "none of",
        "value": ["dev"],
    } in conditions


async def test_trace_bodies_become_v4_rows_one_request_per_trace(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    llm: dict[str, Any] = {
        "input": [{"role": "user", "content": "weather?"}],
        "output": {"role": "assistant"},
        "model": "gpt",
    }
    generation = f.observation(
        "gen-1", "t1", at(11), end=at(12), type="GENERATION", name="llm", parent="t1-span", **llm
    )
    call: dict[str, Any] = {"input": {"city": "Paris"}, "output": "18°C", "metadata": {"k": "v"}}
    tool = f.observation("tool-1", "t1", at(12.5), end=at(13), type="TOOL", name="get_weather", parent="gen-1", **call)
    v3.add_rows(*trace("t1", 10, generation, tool, input="weather?", output="18°C", latency=3.0), *trace("t2", 20))
    client = make_client(ApiGeneration.V3)
    roots = await roots_of(client)
    v3.calls.clear()
    traces = {t.trace_id: t.rows async for t in client.reads.fetch_traces([*roots, roots[0]])}
    # The trace's root row (as Langfuse v4 makes of a legacy trace), then its observations: its span first.
    assert [r["id"] for r in traces["t1"]] == ["t-t1", "t1-span", "gen-1", "tool-1"]
    tool = traces["t1"][3]
    assert (tool["type"], tool["name"], tool["parentObservationId"], tool["traceId"]) == (
        "TOOL",
        "get_weather",
        "gen-1",
        "t1",
    )
    assert (
        json.loads(tool["input"]) == {"city": "Paris"} and tool["output"] == "18°C" and tool["metadata"] == {"k": "v"}
    )
    assert datetime.fromisoformat(tool["startTime"]) == at(12.5) and tool["isRootObservation"] is False
    assert json.loads(traces["t1"][2]["input"])[0]["content"] == "weather?"
    assert [r["id"] for r in traces["t2"]] == ["t-t2", "t2-span"]
    assert len(v3.calls_to("GET", "/api/public/traces/{traceId}")) == 2  # t1 asked twice, fetched once


async def test_missing_trace_gives_no_rows(v3: InProcessLangfuse, make_client: MakeClient) -> None:
    client = make_client(ApiGeneration.V3)
    gone = TraceRoot("gone", "t-gone", None, at(0), None, None, None, None, None, (), {}, {})
    assert [(t.trace_id, t.rows) async for t in client.reads.fetch_traces([gone])] == [("gone", [])]


async def test_dataset_runs_items_and_expected_output_with_item_cache(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    v3.add_dataset("ds-1", "bench")
    v3.add_dataset_item(
        f.dataset_item(
            "item-1",
            "ds-1",
            "bench",
            input={"q": "1+1"},
            expected_output={"a": "2"},
            metadata={"topic": "math"},
        )
    )
    v3.add_dataset_item(f.dataset_item("item-2", "ds-1", "bench", input={"q": "2+2"}, expected_output={"a": "4"}))
    old = f.v3_dataset_run("run-old", "old", "ds-1", "bench", at(-7200))
    run_a = f.v3_dataset_run("run-a", "baseline", "ds-1", "bench", at(10))
    run_b = f.v3_dataset_run("run-b", "candidate", "ds-1", "bench", at(20))
    for run in (old, run_a, run_b):
        v3.add_dataset_run(run)
    for item in (
        f.v3_dataset_run_item("ri-1", run_a, "item-1", "trace-a1", at(11), observation_id="obs-a1"),
        f.v3_dataset_run_item("ri-2", run_a, "item-2", "trace-a2", at(12)),
        f.v3_dataset_run_item("ri-3", run_b, "item-1", "trace-b1", at(21)),
        f.v3_dataset_run_item("ri-4", run_b, "item-2", "trace-b2", at(22)),
    ):
        v3.add_dataset_run_item(item)
    client = make_client(ApiGeneration.V3)
    dataset = await client.reads.get_dataset("bench")
    runs = [e async for e in client.reads.list_experiments([dataset], since=at(0))]
    assert [(r.id, r.name, r.dataset_id, r.item_count, r.end_time) for r in runs] == [
        ("run-b", "candidate", "ds-1", 2, None),  # newest first, total item counts, no end time
        ("run-a", "baseline", "ds-1", 2, None),
    ]
    items = [i for run in runs async for i in client.reads.list_experiment_items(run, since=at(0))]
    got = {i.trace_id: (i.experiment_id, i.dataset_item_id, i.input, i.expected_output) for i in items}
    assert got == {
        "trace-a1": ("run-a", "item-1", {"q": "1+1"}, {"a": "2"}),
        "trace-a2": ("run-a", "item-2", {"q": "2+2"}, {"a": "4"}),
        "trace-b1": ("run-b", "item-1", {"q": "1+1"}, {"a": "2"}),
        "trace-b2": ("run-b", "item-2", {"q": "2+2"}, {"a": "4"}),
    }
    first = next(i for i in items if i.trace_id == "trace-a1")
    assert first.observation_id == "obs-a1" and first.item_metadata == {"topic": "math"} and first.output is None
    assert first.start_time == at(11) and first.experiment_name == "baseline"
    # Two runs share two dataset items: each fetched once.
    assert len(v3.calls_to("GET", "/api/public/dataset-items/{id}")) == 2
    counts, *reads = v3.calls_to("GET", "/api/public/dataset-run-items")
    assert (counts.request.url.params["runName"], counts.request.url.params["limit"]) == ("candidate", "1")
    params = reads[-1].request.url.params
    assert (params["datasetId"], params["runName"]) == ("ds-1", "baseline")


async def test_run_item_of_a_deleted_dataset_item_has_no_expected_output(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    v3.add_dataset("ds-1", "bench")
    run = f.v3_dataset_run("run-a", "baseline", "ds-1", "bench", at(10))
    v3.add_dataset_run(run)
    v3.add_dataset_run_item(f.v3_dataset_run_item("ri-1", run, "deleted-item", "trace-1", at(11)))
    client = make_client(ApiGeneration.V3)
    (experiment,) = [e async for e in client.reads.list_experiments([Dataset("ds-1", "bench")], since=at(0))]
    (item,) = [i async for i in client.reads.list_experiment_items(experiment, since=at(0))]
    assert item.expected_output is None and item.input is None and item.trace_id == "trace-1"


async def test_runs_are_listed_newest_first_until_past_since_and_tracked_runs_however_old(
    v3: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Finding 4: a v3 run's updatedAt is its createdAt; a run still receiving items is found by tracking."""
    runs = [f.v3_dataset_run(f"run-{n}", f"r{n}", "ds-1", "bench", at(-1000 * n)) for n in range(8)]
    v3.add_dataset("ds-1", "bench")
    for run in runs:
        v3.add_dataset_run(run)
    v3.add_dataset_run_item(f.v3_dataset_run_item("ri-5", runs[5], "item-1", "trace-5", at(100)))  # old run, new item
    client = make_client(ApiGeneration.V3, page_size=2)
    dataset = Dataset("ds-1", "bench")
    recent = [e.id async for e in client.reads.list_experiments([dataset], since=at(-1500))]
    assert recent == ["run-0", "run-1"]
    assert len(v3.calls_to("GET", "/api/public/datasets/{datasetName}/runs")) == 2  # not all 4 pages

    v3.calls.clear()
    listed = [e async for e in client.reads.list_experiments([dataset], since=at(-1500), tracked={"run-5"})]
    assert [(e.id, e.item_count, e.start_time) for e in listed] == [
        ("run-0", 0, at(0)),
        ("run-1", 0, at(-1000)),
        ("run-5", 1, at(-5000)),  # created long before since, still tracked: listed with its count
    ]
    assert len(v3.calls_to("GET", "/api/public/datasets/{datasetName}/runs")) == 3  # stops once run-5 met
    (item,) = [i async for i in client.reads.list_experiment_items(listed[2], since=at(-1500))]
    assert item.trace_id == "trace-5"


async def test_langfuse_2_run_items_come_with_the_run_and_items_lack_media_references(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """2.95: ``/dataset-run-items`` answers 405; ``/dataset-items/{id}`` has no mediaReferences."""
    from trace_scorer.langfuse.server.capabilities import ServerCapabilities

    v2 = make_langfuse("2.95.12")
    v2.add_dataset("ds-1", "bench")
    v2.add_dataset_item(f.dataset_item("item-1", "ds-1", "bench", input={"q": 1}, expected_output={"a": 2}))
    run = f.v3_dataset_run("run-a", "nightly/1", "ds-1", "bench", at(10))
    v2.add_dataset_run(run)
    v2.add_dataset_run_item(f.v3_dataset_run_item("ri-1", run, "item-1", "trace-1", at(11)))
    v2.add_dataset_run_item(f.v3_dataset_run_item("ri-2", run, "item-1", "trace-2", at(12)))
    client = make_client(ApiGeneration.V3, version="2.95.12")
    reads: Any = client.reads
    reads.capabilities = ServerCapabilities.from_version("2.95.12")  # what the client passes on connect
    dataset = await client.reads.get_dataset("bench")
    (experiment,) = [e async for e in client.reads.list_experiments([dataset], since=at(0))]
    assert experiment.item_count == 2
    items = [i async for i in client.reads.list_experiment_items(experiment, since=at(0))]
    assert [(i.trace_id, i.expected_output, i.input) for i in items] == [
        ("trace-1", {"a": 2}, {"q": 1}),
        ("trace-2", {"a": 2}, {"q": 1}),
    ]
    assert not v2.calls_to("GET", "/api/public/dataset-run-items")
    (call,) = v2.calls_to("GET", "/api/public/datasets/{datasetName}/runs/{runName}")  # counted and read once
    assert call.request.url.raw_path.decode() == "/api/public/datasets/bench/runs/nightly%2F1"

"""v3 (legacy) reads: traces list and trace bodies as v4-shaped rows, dataset runs, run items, item cache."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient
from tests.support.langfuse_factories import at
from tests.support.langfuse_fake import FakeLangfuse, V3Server
from trace_scorer.langfuse import ApiGeneration, Dataset, TimeWindow, TraceFilter, TraceRoot

TRACES = ("GET", "/api/public/traces")
WINDOW = TimeWindow(at(0), at(3600))


async def roots_of(client: Any, trace_filter: TraceFilter | None = None) -> list[TraceRoot]:
    return [r async for r in client.reads.list_trace_roots(WINDOW, trace_filter or TraceFilter())]


async def test_traces_are_page_paged_oldest_first_and_become_root_rows(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    for n in range(5):
        v3.add_trace(
            f.v3_trace(
                f"t{n}",
                at(100 * n),
                input={"q": n},
                output=f"answer {n}",
                latency=2.5,
                metadata={"tenant": "acme"},
                tags=["support"],
                user_id="u1",
                observations=[],
            )
        )
    v3.add_trace(f.v3_trace("late", at(4000), observations=[]))
    client = make_client(ApiGeneration.V3, page_size=2)
    roots = await roots_of(client)
    assert [r.trace_id for r in roots] == ["t0", "t1", "t2", "t3", "t4"]
    assert len(fake.calls_to(*TRACES)) == 3  # 5 traces, 2 a page
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
    params = fake.calls_to(*TRACES)[0].request.url.params
    assert params["orderBy"] == "timestamp.asc" and params["fields"] == "core,io,metrics"


async def test_v3_trace_without_latency_has_no_end_time(v3: V3Server, make_client: MakeClient) -> None:
    v3.add_trace(f.v3_trace("t1", at(10), latency=None, observations=[]))
    (only,) = await roots_of(make_client(ApiGeneration.V3))
    assert only.end_time is None


async def test_trace_filters_use_simple_params_and_a_json_filter_where_needed(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    v3.add_trace(
        f.v3_trace(
            "keep",
            at(1),
            name="bot",
            tags=["a", "b"],
            metadata={"tier": "gold"},
            user_id="u",
            observations=[],
        )
    )
    v3.add_trace(
        f.v3_trace(
            "dev",
            at(2),
            name="bot",
            tags=["a", "b"],
            metadata={"tier": "gold"},
            user_id="u",
            environment="dev",
            observations=[],
        )
    )
    v3.add_trace(
        f.v3_trace(
            "silver",
            at(3),
            name="bot",
            tags=["a", "b"],
            metadata={"tier": "silver"},
            user_id="u",
            observations=[],
        )
    )
    v3.add_trace(
        f.v3_trace(
            "one-tag", at(4), name="bot", tags=["a"], metadata={"tier": "gold"}, user_id="u", observations=[]
        )
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
    params = fake.calls_to(*TRACES)[0].request.url.params
    assert params.get_list("tags") == ["a", "b"] and params["name"] == "bot"
    conditions = json.loads(params["filter"])
    assert {
        "type": "stringOptions",
        "column": "environment",
        "operator": "none of",
        "value": ["dev"],
    } in conditions


async def test_trace_bodies_become_v4_rows_one_request_per_trace(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    observations = [
        f.v3_observation(
            "gen-1",
            "t1",
            at(11),
            end=at(12),
            type="GENERATION",
            name="llm",
            input=[{"role": "user", "content": "weather?"}],
            output={"role": "assistant"},
            model="gpt",
        ),
        f.v3_observation(
            "tool-1",
            "t1",
            at(12.5),
            end=at(13),
            type="TOOL",
            name="get_weather",
            parent="gen-1",
            input={"city": "Paris"},
            output="18°C",
            metadata={"k": "v"},
        ),
    ]
    v3.add_trace(
        f.v3_trace("t1", at(10), input="weather?", output="18°C", latency=3.0, observations=observations)
    )
    v3.add_trace(f.v3_trace("t2", at(20), observations=[]))
    client = make_client(ApiGeneration.V3)
    roots = await roots_of(client)
    fake.calls.clear()
    traces = {t.trace_id: t.rows async for t in client.reads.fetch_traces([*roots, roots[0]])}
    assert [r["id"] for r in traces["t1"]] == ["t-t1", "gen-1", "tool-1"]
    tool = traces["t1"][2]
    assert (tool["type"], tool["name"], tool["parentObservationId"], tool["traceId"]) == (
        "TOOL",
        "get_weather",
        "gen-1",
        "t1",
    )
    assert (
        json.loads(tool["input"]) == {"city": "Paris"}
        and tool["output"] == "18°C"
        and tool["metadata"] == {"k": "v"}
    )
    assert datetime.fromisoformat(tool["startTime"]) == at(12.5) and tool["isRootObservation"] is False
    assert json.loads(traces["t1"][1]["input"])[0]["content"] == "weather?"
    assert [r["id"] for r in traces["t2"]] == ["t-t2"]
    assert len(fake.calls_to("GET", "/api/public/traces/{traceId}")) == 2  # t1 asked twice, fetched once


async def test_missing_trace_gives_no_rows(v3: V3Server, make_client: MakeClient) -> None:
    client = make_client(ApiGeneration.V3)
    gone = TraceRoot("gone", "t-gone", None, at(0), None, None, None, None, None, (), {}, {})
    assert [(t.trace_id, t.rows) async for t in client.reads.fetch_traces([gone])] == [("gone", [])]


async def test_dataset_runs_items_and_expected_output_with_item_cache(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
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
    v3.add_dataset_item(
        f.dataset_item("item-2", "ds-1", "bench", input={"q": "2+2"}, expected_output={"a": "4"})
    )
    old = f.v3_dataset_run("run-old", "old", "ds-1", "bench", at(-7200))
    run_a = f.v3_dataset_run("run-a", "baseline", "ds-1", "bench", at(10))
    run_b = f.v3_dataset_run("run-b", "candidate", "ds-1", "bench", at(20))
    v3.runs["bench"] = [old, run_a, run_b]
    v3.run_items = [
        f.v3_dataset_run_item("ri-1", run_a, "item-1", "trace-a1", at(11), observation_id="obs-a1"),
        f.v3_dataset_run_item("ri-2", run_a, "item-2", "trace-a2", at(12)),
        f.v3_dataset_run_item("ri-3", run_b, "item-1", "trace-b1", at(21)),
        f.v3_dataset_run_item("ri-4", run_b, "item-2", "trace-b2", at(22)),
    ]
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
    assert (
        first.observation_id == "obs-a1" and first.item_metadata == {"topic": "math"} and first.output is None
    )
    assert first.start_time == at(11) and first.experiment_name == "baseline"
    # Two runs share two dataset items: each fetched once.
    assert len(fake.calls_to("GET", "/api/public/dataset-items/{id}")) == 2
    counts, *reads = fake.calls_to("GET", "/api/public/dataset-run-items")
    assert (counts.request.url.params["runName"], counts.request.url.params["limit"]) == ("candidate", "1")
    params = reads[-1].request.url.params
    assert (params["datasetId"], params["runName"]) == ("ds-1", "baseline")


async def test_run_item_of_a_deleted_dataset_item_has_no_expected_output(
    v3: V3Server, make_client: MakeClient
) -> None:
    run = f.v3_dataset_run("run-a", "baseline", "ds-1", "bench", at(10))
    v3.runs["bench"] = [run]
    v3.run_items = [f.v3_dataset_run_item("ri-1", run, "deleted-item", "trace-1", at(11))]
    client = make_client(ApiGeneration.V3)
    (experiment,) = [e async for e in client.reads.list_experiments([Dataset("ds-1", "bench")], since=at(0))]
    (item,) = [i async for i in client.reads.list_experiment_items(experiment, since=at(0))]
    assert item.expected_output is None and item.input is None and item.trace_id == "trace-1"


async def test_runs_are_listed_newest_first_until_past_since_and_tracked_runs_however_old(
    v3: V3Server, fake: FakeLangfuse, make_client: MakeClient
) -> None:
    """Finding 4: a v3 run's updatedAt is its createdAt; a run still receiving items is found by tracking."""
    runs = [f.v3_dataset_run(f"run-{n}", f"r{n}", "ds-1", "bench", at(-1000 * n)) for n in range(8)]
    v3.runs["bench"] = runs
    v3.run_items = [f.v3_dataset_run_item("ri-5", runs[5], "item-1", "trace-5", at(100))]  # old run, new item
    client = make_client(ApiGeneration.V3, page_size=2)
    dataset = Dataset("ds-1", "bench")
    recent = [e.id async for e in client.reads.list_experiments([dataset], since=at(-1500))]
    assert recent == ["run-0", "run-1"]
    assert len(fake.calls_to("GET", "/api/public/datasets/{datasetName}/runs")) == 2  # not all 4 pages

    fake.calls.clear()
    listed = [e async for e in client.reads.list_experiments([dataset], since=at(-1500), tracked={"run-5"})]
    assert [(e.id, e.item_count, e.start_time) for e in listed] == [
        ("run-0", 0, at(0)),
        ("run-1", 0, at(-1000)),
        ("run-5", 1, at(-5000)),  # created long before since, still tracked: listed with its count
    ]
    assert len(fake.calls_to("GET", "/api/public/datasets/{datasetName}/runs")) == 3  # stops once run-5 met
    (item,) = [i async for i in client.reads.list_experiment_items(listed[2], since=at(-1500))]
    assert item.trace_id == "trace-5"


async def test_langfuse_2_run_items_come_with_the_run_and_items_lack_media_references(
    fake: FakeLangfuse, make_client: MakeClient
) -> None:
    """2.95: ``/dataset-run-items`` answers 405; ``/dataset-items/{id}`` has no mediaReferences."""
    from tests.support.langfuse_fake import V2Server
    from trace_scorer.langfuse.server import ServerCapabilities

    v2 = V2Server(fake)
    v2.add_dataset("ds-1", "bench")
    v2.add_dataset_item(f.dataset_item("item-1", "ds-1", "bench", input={"q": 1}, expected_output={"a": 2}))
    run = f.v3_dataset_run("run-a", "nightly/1", "ds-1", "bench", at(10))
    v2.runs["bench"] = [run]
    v2.run_items = [
        f.v3_dataset_run_item("ri-1", run, "item-1", "trace-1", at(11)),
        f.v3_dataset_run_item("ri-2", run, "item-1", "trace-2", at(12)),
    ]
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
    assert not fake.calls_to("GET", "/api/public/dataset-run-items")
    (call,) = fake.calls_to("GET", "/api/public/datasets/{datasetName}/runs/{runName}")  # counted and read once
    assert call.request.url.raw_path.decode() == "/api/public/datasets/bench/runs/nightly%2F1"

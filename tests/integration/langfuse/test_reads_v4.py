"""v4 reads: root observations (paging, de-duplication, filters), trace bodies (window scan, split,
per-trace fetch), datasets, experiments → items → expected output."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from tests.support import langfuse_factories as f
from tests.support.langfuse_client import MakeClient, make_settings
from tests.support.langfuse_factories import at
from tests.support.langfuse_inprocess import InProcessLangfuse, MakeLangfuse
from trace_scorer.langfuse import ApiGeneration, Dataset, LangfuseClient, TimeWindow, TraceFilter, TraceRoot
from trace_scorer.langfuse.reads.trace_scan import URL_BUDGET, OversizedTrace
from trace_scorer.langfuse.reads.v4 import V4Reader

OBS = ("GET", "/api/public/v2/observations")
WINDOW = TimeWindow(at(0), at(3600))


def reader(client: Any) -> V4Reader:
    assert isinstance(client.reads, V4Reader)
    return client.reads


def root(trace: str, start: float, **kw: Any) -> dict[str, Any]:
    kw.setdefault("end", at(start + 5))
    return f.observation(f"{trace}-root", trace, at(start), root=True, type="AGENT", name="agent", **kw)


def child(trace: str, n: int, start: float, **kw: Any) -> dict[str, Any]:
    kw.setdefault("end", at(start + 0.5))  # v4 serves a span once it ended (OTel exports it then)
    return f.observation(
        f"{trace}-obs{n}", trace, at(start), parent=f"{trace}-root", type="TOOL", name=f"tool{n}", **kw
    )


async def roots_of(
    client: Any, window: TimeWindow = WINDOW, trace_filter: TraceFilter | None = None
) -> list[TraceRoot]:
    return [r async for r in client.reads.list_trace_roots(window, trace_filter or TraceFilter())]


async def test_roots_are_cursor_paged_and_each_trace_comes_once_newest_version(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    stale = root("t2", 200, output="old", updated=at(300))
    fresh = root("t2", 200, output="new", updated=at(900))
    v4.add_rows(
        root("t1", 100),
        stale,
        fresh,
        stale,  # a third copy: ClickHouse has not merged yet
        root("t3", 300),
        root("t4", 400),
        child("t1", 1, 101),  # not a root
        root("t0", 4000),  # outside the window
    )
    client = make_client(ApiGeneration.V4, page_size=2)
    roots = await roots_of(client)
    assert [r.trace_id for r in roots] == ["t4", "t3", "t2", "t1"]  # newest first, each once
    t2 = roots[2]
    assert t2.row["output"] == "new" and t2.updated_at == at(900)
    assert t2.start_time == at(200) and t2.end_time == at(205) and t2.environment == "production"
    # 6 matching rows, 2 a page: 3 requests, each bounded by the window and asking for roots only.
    calls = v4.calls_to(*OBS)
    assert len(calls) == 3
    first = calls[0].request.url.params
    assert first["isRootObservation"] == "true" and first["limit"] == "2"
    bounds = (datetime.fromisoformat(first["fromStartTime"]), datetime.fromisoformat(first["toStartTime"]))
    assert bounds == (WINDOW.start, WINDOW.end)
    assert "cursor" not in first and "cursor" in calls[1].request.url.params


async def test_roots_rows_are_plain_v4_dicts_with_raw_io_strings(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_rows(root("t1", 10, input={"messages": [{"role": "user", "content": "hi"}]}, output="done"))
    (only,) = await roots_of(make_client(ApiGeneration.V4))
    assert isinstance(only.row, dict)
    assert only.row["input"] == '{"messages": [{"role": "user", "content": "hi"}]}'
    assert json.loads(only.row["input"])["messages"][0]["content"] == "hi"
    assert {
        "id",
        "traceId",
        "type",
        "name",
        "startTime",
        "endTime",
        "parentObservationId",
        "metadata",
        "environment",
        "updatedAt",
        "tags",
        "traceName",
    } <= only.row.keys()


async def test_filters_without_simple_params_go_into_a_json_filter_with_the_window(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    wanted: dict[str, Any] = {
        "environment": "production",
        "tags": ["support", "vip"],
        "metadata": {"tenant": "acme"},
        "trace_name": "support-agent",
        "user_id": "u1",
    }
    v4.add_rows(
        root("keep", 10, **wanted),
        root("staging", 20, **{**wanted, "environment": "staging"}),
        root("other-tenant", 30, **{**wanted, "metadata": {"tenant": "globex"}}),
        root("one-tag", 40, **{**wanted, "tags": ["support"]}),
        root("other-name", 50, **{**wanted, "trace_name": "sales"}),
        root("other-user", 60, **{**wanted, "user_id": "u2"}),
    )
    trace_filter = TraceFilter(
        exclude_environments=("staging",),
        tags=("support", "vip"),
        metadata={"tenant": "acme"},
        trace_name="support-agent",
        user_id="u1",
    )
    roots = await roots_of(make_client(ApiGeneration.V4), trace_filter=trace_filter)
    assert [r.trace_id for r in roots] == ["keep"]
    sent = json.loads(v4.calls_to(*OBS)[0].request.url.params["filter"])
    columns = {(c["column"], c["operator"]) for c in sent}
    assert {("startTime", ">="), ("startTime", "<"), ("isRootObservation", "=")} <= columns


async def test_environment_list_uses_the_repeated_simple_parameter(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_rows(
        root("a", 1, environment="production"),
        root("b", 2, environment="eu"),
        root("c", 3, environment="dev"),
    )
    roots = await roots_of(make_client(ApiGeneration.V4), trace_filter=TraceFilter(environments=("production", "eu")))
    assert sorted(r.trace_id for r in roots) == ["a", "b"]
    params = v4.calls_to(*OBS)[0].request.url.params
    assert params.get_list("environment") == ["production", "eu"] and "filter" not in params


def _trace(name: str, start: float, children: int, spacing: float = 1.0) -> list[dict[str, Any]]:
    rows = [root(name, start, end=at(start + spacing * (children + 1)))]
    rows += [child(name, n, start + spacing * (n + 1)) for n in range(children)]
    return rows


async def test_window_scan_groups_rows_by_trace_dedupes_and_ignores_other_traces(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    a, b, c, other = _trace("a", 100, 3), _trace("b", 200, 2), _trace("c", 300, 4), _trace("other", 250, 5)
    duplicate = dict(a[1], updatedAt=f.iso(at(9999)), output='"newer"')
    v4.add_rows(*a, *b, *c, *other, duplicate)
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0)
    roots = [r for r in await roots_of(client) if r.trace_id != "other"]
    v4.calls.clear()
    traces = {t.trace_id: t.rows async for t in client.reads.fetch_traces(roots)}
    assert set(traces) == {"a", "b", "c"}
    assert [r["id"] for r in traces["a"]] == ["a-root", "a-obs0", "a-obs1", "a-obs2"]  # oldest first
    assert traces["a"][1]["output"] == '"newer"'  # the duplicate's newest version
    assert len(traces["c"]) == 5 and len(traces["b"]) == 3
    # One windowed scan (22 rows < one page), no traceId parameter.
    calls = v4.calls_to(*OBS)
    assert len(calls) == 1 and "traceId" not in calls[0].request.url.params


async def test_window_split_in_halves_when_rows_exceed_the_cap(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    # Six traces running side by side over the same hour, 40 rows each: no trace finishes early,
    # so a scan would have to hold 240 rows; the cap is 100.
    traces = {f"t{n}": _trace(f"t{n}", 10 + n, 39, spacing=60) for n in range(6)}
    v4.add_rows(*[row for rows in traces.values() for row in rows])
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, max_rows_in_memory=100, page_size=50)
    roots = await roots_of(client, TimeWindow(at(0), at(100)))
    got = {t.trace_id: [r["id"] for r in t.rows] async for t in client.reads.fetch_traces(roots)}
    assert got == {name: [r["id"] for r in rows] for name, rows in traces.items()}
    scanner = reader(client).scanner
    assert scanner.splits >= 1
    assert scanner.peak_rows <= 100 + 50  # the cap, overshot by at most one page


async def test_a_trace_over_the_row_cap_is_fetched_only_up_to_the_cap(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_rows(*_trace("big", 100, 500), *_trace("small", 900, 3))  # 501 rows, 10+ pages of 50
    client = make_client(ApiGeneration.V4, page_size=50, max_rows_per_trace=120)
    roots = await roots_of(client)
    v4.calls.clear()
    got = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}
    big = got["big"]
    assert isinstance(big, OversizedTrace) and big.rows == [] and big.limit == 120
    assert big.rows_read == 150  # three pages read, then reading stopped
    assert len(got["small"].rows) == 4 and not isinstance(got["small"], OversizedTrace)
    big_reads = [c for c in v4.calls_to(*OBS) if c.request.url.params["traceId"] == "big"]
    assert len(big_reads) == 3


async def test_the_window_scan_drops_a_trace_over_the_row_cap_and_stops_when_the_rest_is_done(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    # Newest first: the small traces (starting at 2000+) are read, then the big one (500 rows from 100 s on).
    small = {f"s{n}": _trace(f"s{n}", 2000 + 10 * n, 3) for n in range(3)}
    v4.add_rows(*_trace("big", 100, 500), *[row for rows in small.values() for row in rows])
    client = make_client(
        ApiGeneration.V4, per_trace_fetch_max=0, page_size=50, max_rows_per_trace=120, trace_slack="1s"
    )
    roots = await roots_of(client)
    v4.calls.clear()
    got = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}
    assert {name: [r["id"] for r in got[name].rows] for name in small} == {
        name: [r["id"] for r in rows] for name, rows in small.items()
    }
    assert isinstance(got["big"], OversizedTrace) and got["big"].rows == [] and got["big"].rows_read == 121
    # 12 small rows + 121 of the big trace's = 3 pages; the other 7 pages of the window are never read.
    assert len(v4.calls_to(*OBS)) == 3
    assert reader(client).scanner.peak_rows <= 120 + 50


async def test_the_window_scan_holds_no_more_than_the_cap_of_a_big_trace_read_before_the_others(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    # The big trace is the newest: its rows come first and must be read through to reach the others,
    # but they are dropped as they arrive once over the cap.
    small = {f"s{n}": _trace(f"s{n}", 10 + n, 3) for n in range(3)}
    v4.add_rows(*_trace("big", 1000, 500), *[row for rows in small.values() for row in rows])
    client = make_client(
        ApiGeneration.V4, per_trace_fetch_max=0, page_size=50, max_rows_per_trace=120, trace_slack="1s"
    )
    roots = await roots_of(client)
    got = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}
    assert {name: len(got[name].rows) for name in small} == {name: 4 for name in small}
    assert isinstance(got["big"], OversizedTrace)
    assert reader(client).scanner.peak_rows <= 120 + 50
    assert reader(client).scanner.splits == 0


async def test_a_few_traces_are_fetched_one_request_each_bounded_by_their_times(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_rows(*_trace("a", 100, 2), *_trace("b", 500, 1), *_trace("c", 900, 1))
    client = make_client(ApiGeneration.V4, trace_slack="1m")
    roots = [r for r in await roots_of(client) if r.trace_id in ("a", "b")]
    v4.calls.clear()
    traces = {t.trace_id: len(t.rows) async for t in client.reads.fetch_traces(roots)}
    assert traces == {"b": 2, "a": 3}
    params = {c.request.url.params["traceId"]: c.request.url.params for c in v4.calls_to(*OBS)}
    assert set(params) == {"a", "b"}
    assert datetime.fromisoformat(params["a"]["fromStartTime"]) == at(100 - 60)  # root start - slack
    assert datetime.fromisoformat(params["a"]["toStartTime"]) == at(100 + 3 + 60)  # root end + slack


async def test_datasets_by_name_are_url_encoded_and_cached(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    v4.add_dataset("ds-9", "team/bench v2")
    client = make_client(ApiGeneration.V4)
    assert await client.reads.get_dataset("team/bench v2") == Dataset("ds-9", "team/bench v2")
    assert await client.reads.get_dataset("team/bench v2") == Dataset("ds-9", "team/bench v2")
    (call,) = v4.calls_to("GET", "/api/public/v2/datasets/{datasetName}")
    assert call.request.url.raw_path.decode() == "/api/public/v2/datasets/team%2Fbench%20v2"


async def test_experiments_then_items_give_trace_output_and_expected_output(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_dataset("ds-1", "bench")
    v4.add_dataset_item(f.dataset_item("item-2", "ds-1", "bench", input={"q": "2+2"}, expected_output={"answer": "4"}))
    v4.add_experiment(f.experiment("exp-1", "baseline", "ds-1", at(0), metadata={"model": "gpt-x"}))
    v4.add_experiment(f.experiment("exp-other", "other", "ds-other", at(0)))
    rows = [
        f.experiment_item(
            "root-1",
            "trace-1",
            "exp-1",
            "baseline",
            "item-1",
            at(10),
            input={"q": "1+1"},
            output="2",
            expected_output={"answer": "2"},
            item_metadata={"topic": "math"},
        ),
        f.experiment_item(
            "root-2",
            "trace-2",
            "exp-1",
            "baseline",
            "item-2",
            at(20),
            input={"q": "2+2"},
            output="5",
        ),
        # As real servers send an item whose runner recorded no expected output: "" (joined).
        f.experiment_item("root-3", "trace-3", "exp-1", "baseline", "item-2", at(30), output="4"),
        f.experiment_item("root-4", "trace-4", "exp-other", "other", "item-9", at(40), dataset_id="ds-other"),
    ]
    for row in rows:
        v4.add_experiment_item(row)
    client = make_client(ApiGeneration.V4)
    dataset = await client.reads.get_dataset("bench")
    experiments = [e async for e in client.reads.list_experiments([dataset], since=at(0))]
    assert [(e.id, e.item_count, e.metadata) for e in experiments] == [("exp-1", 3, {"model": "gpt-x"})]
    assert experiments[0].start_time == at(10) and experiments[0].end_time == at(30)
    items = [i async for i in client.reads.list_experiment_items(experiments[0], since=at(0))]
    got = {i.trace_id: (i.dataset_item_id, i.output, i.expected_output) for i in items}
    assert got == {
        "trace-1": ("item-1", "2", {"answer": "2"}),
        "trace-2": ("item-2", "5", {"answer": "4"}),  # joined to the dataset item
        "trace-3": ("item-2", "4", {"answer": "4"}),
    }
    first = next(i for i in items if i.trace_id == "trace-1")
    assert (first.experiment_id, first.observation_id, first.dataset_id) == ("exp-1", "root-1", "ds-1")
    assert first.item_metadata == {"topic": "math"} and first.start_time == at(10)
    assert first.input == {"q": "1+1"}  # sent as a raw JSON string, read as JSON
    # The missing expected output cost one dataset-item request, cached for the second item.
    assert len(v4.calls_to("GET", "/api/public/dataset-items/{id}")) == 1
    limits = {c.request.url.params["limit"] for c in v4.calls_to("GET", "/api/public/experiment-items")}
    assert limits == {"100"}  # the endpoint's maximum, though page_size is 1000


async def test_experiment_items_as_real_servers_send_them_raw_strings_and_empty_expected_output(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Finding 5: ``expectedOutput`` is always sent, a raw string, ``""`` when the runner sent none."""
    v4.add_dataset_item(f.dataset_item("item-1", "ds-1", "bench", input={"q": "1+1"}, expected_output="2"))
    v4.add_experiment(f.experiment("exp-1", "run", "ds-1", at(0)))
    row = f.experiment_item("root-1", "trace-1", "exp-1", "run", "item-1", at(1), output='{"answer": "2"}')
    assert row["expectedOutput"] == "" and row["input"] is None
    for item in [
        row,
        f.experiment_item("root-2", "trace-2", "exp-1", "run", "item-1", at(2), expected_output="plain text"),
        f.experiment_item("root-3", "trace-3", "exp-1", "run", "item-1", at(3), expected_output=["a", 1]),
        f.experiment_item("root-4", "trace-4", "exp-1", "run", "item-gone", at(4), output="not {json"),
        f.experiment_item("root-5", "trace-5", "exp-1", "run", "item-1", at(5), expected_output='"quoted"'),
    ]:
        v4.add_experiment_item(item)
    client = make_client(ApiGeneration.V4)
    (experiment,) = [e async for e in client.reads.list_experiments([Dataset("ds-1", "bench")], since=at(0))]
    items = {i.trace_id: i async for i in client.reads.list_experiment_items(experiment, since=at(0))}
    joined = items["trace-1"]
    assert (joined.expected_output, joined.input, joined.output) == ("2", {"q": "1+1"}, {"answer": "2"})
    assert items["trace-2"].expected_output == "plain text"  # not JSON: stays a string
    assert items["trace-3"].expected_output == ["a", 1]
    assert items["trace-4"].expected_output is None and items["trace-4"].output == "not {json"  # item deleted
    assert items["trace-5"].expected_output == "quoted"
    assert len(v4.calls_to("GET", "/api/public/dataset-items/{id}")) == 2  # item-1 once (cached), item-gone


async def test_experiment_items_follow_the_cursor(v4: InProcessLangfuse, make_client: MakeClient) -> None:
    v4.add_experiment(f.experiment("exp-1", "run", "ds-1", at(0)))
    for n in range(7):
        v4.add_experiment_item(
            f.experiment_item(f"root-{n}", f"trace-{n}", "exp-1", "run", f"item-{n}", at(n), expected_output=[n])
        )
    client = make_client(ApiGeneration.V4, page_size=3)
    (experiment,) = [e async for e in client.reads.list_experiments([Dataset("ds-1", "bench")], since=at(0))]
    items = [i async for i in client.reads.list_experiment_items(experiment, since=at(0))]
    assert sorted(i.expected_output[0] for i in items) == list(range(7))
    assert len(v4.calls_to("GET", "/api/public/experiment-items")) == 3


async def test_long_metadata_keys_can_be_read_untruncated(v4: InProcessLangfuse, clock: Any) -> None:
    v4.add_rows(root("t1", 10))
    client = LangfuseClient(make_settings(), clock=clock, expand_metadata=["system_prompt", "rubric"])
    client.use_generation(ApiGeneration.V4)
    try:
        await roots_of(client)
    finally:
        await client.aclose()
    assert v4.calls_to(*OBS)[0].request.url.params["expandMetadata"] == "system_prompt,rubric"


async def test_observation_pages_are_not_parsed_into_the_packages_models(
    v4: InProcessLangfuse, make_client: MakeClient, monkeypatch: Any
) -> None:
    """The generated client parses a page into its models at ~0.25 ms a row (25 times the JSON decoding),
    and the rows handed on are the plain JSON: on a busy worker that parsing starved the judges. The
    observation pages bypass it; the query is encoded exactly as the generated client encodes it."""
    import langfuse.api.observations.raw_client as raw_client

    def no_parsing(**_: Any) -> Any:
        raise AssertionError("observation pages must not go through the package's model parser")

    monkeypatch.setattr(raw_client, "parse_obj_as", no_parsing)
    v4.add_rows(root("t1", 10), child("t1", 1, 11), root("t2", 20), child("t2", 1, 21))
    client = make_client(ApiGeneration.V4)
    roots = await roots_of(client, trace_filter=TraceFilter(environments=("production", "staging")))
    traces = [t async for t in client.reads.fetch_traces(roots)]
    assert sorted(t.trace_id for t in traces) == ["t1", "t2"]
    assert all(len(t.rows) == 2 for t in traces)
    first = v4.calls_to(*OBS)[0].request.url
    assert first.params.get_list("environment") == ["production", "staging"]
    assert first.params["isRootObservation"] == "true"
    assert datetime.fromisoformat(first.params["fromStartTime"]) == WINDOW.start


async def test_the_scan_reads_around_a_trace_over_the_row_cap_instead_of_through_it(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    # Issue #22 item 2: the big trace is the newest and long; once over the cap its other rows are not
    # read. Traces running beside it are read by id, the older ones by a scan of their own narrower window.
    older = {f"s{n}": _trace(f"s{n}", 10 + n, 3) for n in range(3)}
    beside = {f"b{n}": _trace(f"b{n}", 1100 + 100 * n, 2) for n in range(2)}
    v4.add_rows(*_trace("big", 1000, 500), *[row for rows in [*older.values(), *beside.values()] for row in rows])
    client = make_client(
        ApiGeneration.V4, per_trace_fetch_max=0, page_size=50, max_rows_per_trace=120, trace_slack="1s"
    )
    roots = await roots_of(client)
    v4.calls.clear()
    got = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}

    expected = {**older, **beside}
    assert {name: [r["id"] for r in got[name].rows] for name in expected} == {
        name: [r["id"] for r in rows] for name, rows in expected.items()
    }
    assert isinstance(got["big"], OversizedTrace)
    calls = v4.calls_to(*OBS)
    # 3 pages of the window until the big trace is over the cap, one request per trace beside it, one
    # page for the older ones: 6 requests, where reading through the big trace took all 11 pages.
    assert len(calls) == 6
    assert sorted(t for c in calls if (t := c.request.url.params.get("traceId"))) == ["b0", "b1"]


async def test_a_listing_stops_at_max_traces_of_the_earliest_and_ends_where_the_next_starts(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    # Issue #22 item 7: 25 traces, at most 10 held. Rows come newest first, so the earliest are known only
    # at the end; the listing ends at the first trace beyond them (t10 and t11 start together: both wait).
    starts = {f"t{n:02d}": 100 + n for n in range(25)}
    starts["t11"] = starts["t10"]
    v4.add_rows(*[root(trace, start) for trace, start in starts.items()], *_trace("t03", 103, 2)[1:])
    client = make_client(ApiGeneration.V4, page_size=4)
    listing = await client.reads.list_roots(WINDOW, TraceFilter(), max_traces=10)
    assert sorted(r.trace_id for r in listing.roots) == [f"t{n:02d}" for n in range(10)]
    assert listing.complete_until == at(110)
    # The next window starts there and holds the others; nothing is listed twice or left out.
    rest = await client.reads.list_roots(TimeWindow(at(110), WINDOW.end), TraceFilter(), max_traces=10)
    assert sorted(r.trace_id for r in rest.roots) == [f"t{n:02d}" for n in range(10, 20)]
    assert rest.complete_until == at(120)

    # Roots the caller knows are neither held nor counted.
    def first_five(roots: Sequence[TraceRoot]) -> set[str]:
        return {r.trace_id for r in roots if r.start_time < at(105)}

    known = await client.reads.list_roots(WINDOW, TraceFilter(), max_traces=10, known=first_five)
    assert sorted(r.trace_id for r in known.roots) == [f"t{n:02d}" for n in range(5, 15)]
    assert known.complete_until == at(115)


async def test_a_listing_of_roots_starting_at_one_instant_is_not_cut(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    v4.add_rows(*[root(f"t{n}", 100) for n in range(5)])
    client = make_client(ApiGeneration.V4, page_size=2)
    listing = await client.reads.list_roots(TimeWindow(at(100), at(200)), TraceFilter(), max_traces=2)
    assert len(listing.roots) == 5 and listing.complete_until == at(200)  # a cut there could never move on


async def test_a_scan_of_a_few_traces_among_many_reads_only_their_rows(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Issue #29: the traces of a live stream run side by side; a scan asks for its traces by id (``traceId
    any of``, as many a request as its URL holds), not for every row within the slack around them."""
    busy = [row for n in range(400) for row in (root(f"t{n}", 10 + n), child(f"t{n}", 1, 11 + n))]
    v4.add_rows(*busy)
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, page_size=1000)
    wanted = {r.trace_id: r for r in await roots_of(client) if int(r.trace_id[1:]) % 2 == 0}
    v4.calls.clear()
    got = {t.trace_id: [r["id"] for r in t.rows] async for t in client.reads.fetch_traces(list(wanted.values()))}
    assert got == {t: [f"{t}-root", f"{t}-obs1"] for t in wanted}
    calls = v4.calls_to(*OBS)
    asked = [json.loads(c.request.url.params["filter"]) for c in calls]
    ids = [next(c["value"] for c in conditions if c["column"] == "traceId") for conditions in asked]
    assert all(len(c.request.url.raw_path) <= URL_BUDGET for c in calls)
    assert sorted(t for group in ids for t in group) == sorted(wanted)  # each asked for once
    assert len(calls) == 1  # 200 short ids fit one request line: one page (the other 200 traces never read)


def ids_asked(call: Any) -> list[str]:
    """The trace ids of an id-filtered read (its ``traceId any of`` condition)."""
    conditions = json.loads(call.request.url.params["filter"])
    return list(next(c["value"] for c in conditions if c["column"] == "traceId"))


def request_line(call: Any) -> int:
    """Bytes of the request line as sent (``GET <path?query> HTTP/1.1``)."""
    return len(b"GET " + call.request.url.raw_path + b" HTTP/1.1\r\n")


async def test_a_read_holds_as_many_trace_ids_as_fit_its_request_line_whatever_their_length(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """OTel trace ids (32 hex digits) are shorter than UUIDs: more of them fit one request line, which
    stays within the 8 KiB an nginx in front of the server takes (its default: longer lines get 414)."""
    v4 = make_langfuse(url_limit="nginx")
    hexes = [uuid.UUID(int=n + 1).hex for n in range(300)]
    uuids = [str(uuid.UUID(int=n + 10_000)) for n in range(300)]
    v4.add_rows(*[row for n, t in enumerate(hexes + uuids) for row in (root(t, 10 + n), child(t, 1, 11 + n))])
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, page_size=1000)
    listed = {r.trace_id: r for r in await roots_of(client)}
    # Until a read has shown how many rows a trace has, a read holds no more ids than it used to (150).
    assert len([t async for t in client.reads.fetch_traces([listed[t] for t in hexes[:10]])]) == 10
    per_read = {}
    for name, ids in (("hex", hexes), ("uuid", uuids)):
        v4.calls.clear()
        got = [t.trace_id async for t in client.reads.fetch_traces([listed[t] for t in ids])]
        assert sorted(got) == sorted(ids)
        calls = v4.calls_to(*OBS)
        assert all(c.status == 200 for c in calls) and all(request_line(c) <= 8 * 1024 for c in calls)
        per_read[name] = max(len(ids_asked(c)) for c in calls)
    assert per_read["hex"] > per_read["uuid"] and per_read["hex"] > 150  # 150: the fixed count before


async def test_a_read_refused_as_too_long_is_asked_again_with_half_the_ids_and_later_reads_keep_that(
    make_langfuse: MakeLangfuse, make_client: MakeClient
) -> None:
    """A proxy with a smaller limit than the one assumed (here: nginx's 414 at 8 KiB, the client allowing
    16 KiB): the read is asked again in halves, and later reads start from that many ids."""
    v4 = make_langfuse(url_limit="nginx")
    ids = [uuid.UUID(int=n + 1).hex for n in range(300)]
    v4.add_rows(*[row for n, t in enumerate(ids) for row in (root(t, 10 + n), child(t, 1, 11 + n))])
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, page_size=1000)
    listed = [r for r in await roots_of(client)]
    reader(client).scanner.id_reads.budget = 16 * 1024
    v4.calls.clear()
    got = [t.trace_id async for t in client.reads.fetch_traces(listed)]
    assert sorted(got) == sorted(ids)  # each trace once, all rows read
    statuses = [c.status for c in v4.calls_to(*OBS)]
    assert statuses[0] == 414 and statuses.count(414) == 1
    refused = len(ids_asked(v4.calls_to(*OBS)[0]))
    assert reader(client).scanner.id_reads.max_ids == refused // 2

    v4.calls.clear()
    assert len([t async for t in client.reads.fetch_traces(listed)]) == len(ids)
    assert all(c.status == 200 for c in v4.calls_to(*OBS))
    assert max(len(ids_asked(c)) for c in v4.calls_to(*OBS)) <= refused // 2


def filters_of(v4: InProcessLangfuse) -> list[list[dict[str, Any]]]:
    return [json.loads(c.request.url.params["filter"]) for c in v4.calls_to(*OBS)]


async def test_the_roots_a_listing_read_are_not_read_again_with_their_traces_rows(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """Issue #29: the listing asks for every field a read of a trace's rows returns, so a read of the
    traces it found leaves their roots out (``isRootObservation = false``) — and hands on the very rows a
    read of the whole traces gives: each root (both of a trace with two), without the listing's
    ``trace_context`` fields, newest version."""
    rows = [
        row
        for n in range(30)
        for row in (
            root(f"t{n}", 10 + n, tags=["a"], trace_name="agent-run", input={"q": n}, output={"a": n}),
            child(f"t{n}", 1, 11 + n),
            child(f"t{n}", 2, 11.5 + n),
        )
    ]
    second = f.observation("t3-second", "t3", at(13.2), end=at(13.4), root=True, type="GENERATION", model="m")
    newer = root("t4", 14, input={"q": "newer"}, updated=at(500))
    v4.add_rows(*rows, second, newer)
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, page_size=1000)
    listed = await roots_of(client)
    assert all(r.listed_roots is not None for r in listed)
    assert {row["id"] for r in listed if r.trace_id == "t3" for row in r.listed_roots or ()} == {"t3-root", "t3-second"}

    v4.calls.clear()
    got = {t.trace_id: t.rows async for t in client.reads.fetch_traces(listed)}
    conditions = filters_of(v4)
    assert conditions and all(
        {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": False} in c for c in conditions
    )
    v4.calls.clear()
    whole = {
        t.trace_id: t.rows async for t in client.reads.fetch_traces([replace(r, listed_roots=None) for r in listed])
    }
    assert not any(c["column"] == "isRootObservation" for conditions in filters_of(v4) for c in conditions)
    assert got == whole and len(got) == 30
    assert [r["id"] for r in got["t3"]] == ["t3-root", "t3-second", "t3-obs1", "t3-obs2"]
    assert json.loads(next(r for r in got["t4"] if r["id"] == "t4-root")["input"]) == {"q": "newer"}
    assert all("tags" not in r and "traceName" not in r for rows_ in got.values() for r in rows_)


async def test_a_listing_filtered_on_metadata_leaves_the_roots_to_the_read(
    v4: InProcessLangfuse, make_client: MakeClient
) -> None:
    """A metadata condition holds per root row, so a trace's second root may not be listed: the read of
    the trace then reads its roots too."""
    v4.add_rows(
        root("t1", 10, metadata={"team": "x"}),
        f.observation("t1-second", "t1", at(12), end=at(13), root=True, type="SPAN"),
        child("t1", 1, 11),
    )
    client = make_client(ApiGeneration.V4, per_trace_fetch_max=0, page_size=1000)
    (listed,) = await roots_of(client, trace_filter=TraceFilter(metadata={"team": "x"}))
    assert listed.listed_roots is None
    v4.calls.clear()
    got = {t.trace_id: t.rows async for t in client.reads.fetch_traces([listed, replace(listed, trace_id="t9")])}
    assert not any(c["column"] == "isRootObservation" for conditions in filters_of(v4) for c in conditions)
    assert sorted(r["id"] for r in got["t1"]) == ["t1-obs1", "t1-root", "t1-second"]

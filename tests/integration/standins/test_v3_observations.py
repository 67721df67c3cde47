"""``GET /api/public/observations`` (the legacy v1 list) on the stand-in, as 3.x and 2.x servers answer it
(``web/src/pages/api/public/observations/index.ts``; 3.x ``generateObservationsForPublicApi``, 2.x's
PostgreSQL query): page/limit with ``limit`` ≤ 100, ``start_time DESC`` only (ties reordered between
pages), ``[fromStartTime, toStartTime)``, 3.x's unmerged duplicates, 2.x's row shape. Plain httpx, so
these hold whatever the adapter does."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx

from standins.formats import RowBuilder
from standins.generate import Corpus
from tests.support.standins import END, StartLangfuse, small_scenario

LIST = "/api/public/observations"
END_TIME = datetime.fromisoformat(END)


def http(lf: Any) -> httpx.Client:
    return httpx.Client(base_url=lf.url, auth=(lf.public_key, lf.secret_key), timeout=10)


def z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def all_pages(client: httpx.Client, **params: Any) -> tuple[list[list[dict[str, Any]]], dict[str, Any]]:
    """Pages 1 … ``meta.totalPages`` (the way a client that trusts ``totalPages`` reads), and the meta."""
    pages, page = [], 1
    while True:
        answer = client.get(LIST, params={**params, "page": page})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append(body["data"])
        if page >= body["meta"]["totalPages"]:
            return pages, body["meta"]
        page += 1


def tied_trace(trace_id: str, start: datetime, ties: int) -> list[dict[str, Any]]:
    """A root and ``ties`` tool calls that all start in the same millisecond."""
    builder = RowBuilder(
        trace_id, start, environment="production", user_id="u-1", session_id=None, tags=[], release=None,
        trace_name="tied",
    )  # fmt: skip
    builder.obs("root", "SPAN", "tied-agent", 0, 9_000, input={"q": "go"}, output={"a": "done"})
    for n in range(ties):
        builder.obs(f"tool-{n}", "TOOL", "lookup", 1_000, 50 + n, parent="root", input={"n": n}, output={"ok": n})
    return builder.rows


def test_3x_pages_newest_first_within_a_half_open_window(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(traces=40, duplicate_rate=0.0, datasets=())
    lf = start_lf(version="3.120.0", scenario=scenario)
    low, high = END_TIME - timedelta(seconds=100), END_TIME - timedelta(seconds=40)
    corpus = Corpus(scenario)
    expected = {
        record.row["id"]: datetime.fromisoformat(record.row["startTime"])
        for header in corpus.production_headers()
        for record in corpus.render(header).records
        if low <= datetime.fromisoformat(record.row["startTime"]) < high
    }
    assert len(set(expected.values())) == len(expected), "the window must hold no startTime twice for this test"
    newest_first = sorted(expected, key=lambda i: expected[i], reverse=True)
    with http(lf) as client:
        pages, meta = all_pages(client, fromStartTime=z(low), toStartTime=z(high), limit=7)
        assert client.get(LIST, params={"limit": 101}).status_code == 400  # zod: limit ≤ 100
        assert client.get(LIST, params={"page": 0}).status_code == 400
        on_the_edge = client.get(LIST, params={"fromStartTime": z(low), "toStartTime": z(low), "limit": 5})
    assert [row["id"] for page in pages for row in page] == newest_first
    assert all(len(page) == 7 for page in pages[:-1]) and 0 < len(pages[-1]) <= 7
    assert meta["totalItems"] == len(expected) and meta["totalPages"] == -(-len(expected) // 7)
    assert on_the_edge.json()["data"] == []  # [from, to): an empty window holds nothing


def test_3x_answers_unmerged_rows_side_by_side_and_counts_rows(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(traces=4, duplicate_rate=1.0, datasets=())
    lf = start_lf(version="3.120.0", scenario=scenario)
    trace_id = next(Corpus(scenario).production_headers()).trace_id
    with http(lf) as client:
        pages, meta = all_pages(client, traceId=trace_id, limit=3)
        merged = client.get(f"/api/public/traces/{trace_id}").json()["observations"]
    observations = {o["id"] for o in merged}
    first = pages[0]
    assert len({row["id"] for row in first}) == 3 and len(first) == 6  # 3 observations, both rows of each
    assert [row["id"] for row in first][::2] == [row["id"] for row in first][1::2]  # side by side
    assert {row["endTime"] is None for row in first} == {True, False}  # the started and the finished row
    served = [row["id"] for page in pages for row in page]
    assert set(served) == observations and len(served) == 2 * len(observations)
    # totalItems counts rows (count() without FINAL): totalPages overshoots, the pages past the end are empty
    assert meta["totalItems"] == 2 * len(observations)
    assert pages[-1] == [] and sum(1 for page in pages if page) == -(-len(observations) // 3)
    assert len(merged) == len(observations)  # /traces/{id} answers each observation once


def test_ties_in_start_time_come_in_another_order_on_every_page(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="3.120.0", scenario=small_scenario(traces=2, datasets=()))
    trace_id = "7" * 32
    rows = tied_trace(trace_id, END_TIME - timedelta(minutes=10), ties=30)
    lf.add_traces(rows)
    tied = {row["id"] for row in rows[1:]}
    with http(lf) as client:
        pages, _ = all_pages(client, traceId=trace_id, limit=10)
        whole = client.get(LIST, params={"traceId": trace_id, "limit": 100}).json()["data"]
    served = [row["id"] for page in pages[:3] for row in page]
    assert len(served) == 30 and set(served) <= tied
    assert len(set(served)) < len(tied)  # offset paging over ties: some served twice, others never
    assert [row["id"] for row in pages[3]] == [rows[0]["id"]]  # the root starts earlier: last
    assert {row["id"] for row in whole} == {row["id"] for row in rows}  # one page: all of them


def test_2x_rows_have_its_shape_one_row_an_observation_and_no_environment(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(traces=4, duplicate_rate=1.0, datasets=())
    lf = start_lf(version="2.95.12", scenario=scenario)
    trace_id = next(Corpus(scenario).production_headers()).trace_id
    with http(lf) as client:
        pages, meta = all_pages(client, traceId=trace_id, limit=3, environment="nowhere")
        merged = client.get(f"/api/public/traces/{trace_id}").json()["observations"]
    served = [row for page in pages for row in page]
    assert len(served) == len({row["id"] for row in served}) == len(merged) == meta["totalItems"]
    assert all(row["endTime"] is not None for row in served)  # PostgreSQL holds the one, updated row
    for row in [*served, *merged]:
        assert not {"environment", "usageDetails", "costDetails"} & set(row)
        assert {"promptTokens", "completionTokens", "totalTokens", "usage"} <= set(row)
    assert sorted(served, key=lambda r: r["id"]) == sorted(merged, key=lambda r: r["id"])


def test_the_trace_list_names_the_observations_the_list_returns(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(traces=6, duplicate_rate=0.5, datasets=())
    lf = start_lf(version="3.120.0", scenario=scenario)
    with http(lf) as client:
        traces = client.get("/api/public/traces", params={"fields": "core,observations", "limit": 100}).json()["data"]
        assert len(traces) == 6
        for trace in traces:
            listed = client.get(LIST, params={"traceId": trace["id"], "limit": 100}).json()["data"]
            assert set(trace["observations"]) == {row["id"] for row in listed}


def test_v4_events_only_answers_the_legacy_list_404_before_auth(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="4.16.0")
    with httpx.Client(base_url=lf.url, timeout=10) as client:
        answer = client.get(LIST, params={"limit": 10})
    assert answer.status_code == 404 and "events_only" in answer.json()["message"]


def test_a_2x_without_to_start_time_answers_past_the_window(start_lf: StartLangfuse) -> None:
    lf = start_lf(
        version="2.95.12",
        scenario=small_scenario(traces=20, datasets=()),
        observations_without_to_start_time=True,
    )
    high = END_TIME - timedelta(seconds=40)
    with http(lf) as client:
        rows = client.get(LIST, params={"toStartTime": z(high), "limit": 5}).json()["data"]
    assert len(rows) == 5 and all(datetime.fromisoformat(row["startTime"]) >= high for row in rows)

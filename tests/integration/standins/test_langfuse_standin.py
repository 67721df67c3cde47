"""The adapter (``trace_scorer.langfuse.LangfuseClient``) against the Langfuse stand-in over real HTTP, both
API generations: start-up, roots with paging and duplicate rows, traces, experiments, scores (202, 207,
the upsert rule), the contract (zero violations, and violations caught), and fault injection."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from langfuse.api import AsyncLangfuseAPI

from standins.faults import ScriptedFault
from standins.generate import Corpus, Scenario
from standins.handles import LangfuseHandle, wait_until
from tests.support.langfuse_client import MakeClient
from tests.support.standins import END, StartLangfuse, small_scenario
from trace_scorer.extract import extract_sample
from trace_scorer.langfuse import (
    ApiGeneration,
    LangfuseAuthError,
    LangfuseClient,
    ScoreConfigSpec,
    ScoreSubject,
    ScoreToPost,
    TimeWindow,
    TraceFilter,
    TraceRoot,
)
from trace_scorer.langfuse.http import endpoints as ep

ALL_TIME = TimeWindow(datetime.fromisoformat(END) - timedelta(days=1), datetime.fromisoformat(END) + timedelta(hours=1))
PRODUCTION = TraceFilter(environments=("production",))


def production(row: dict[str, Any]) -> bool:
    """A production root."""
    return bool(row["environment"] == "production")


def expected_roots(
    scenario: Scenario, predicate: Callable[[dict[str, Any]], bool] = lambda row: True
) -> dict[str, dict[str, Any]]:
    """The production roots a local corpus of the same scenario holds (the stand-in's data is a function
    of the scenario)."""
    corpus = Corpus(scenario)
    roots = {}
    for header in corpus.production_headers():
        row = corpus.root_record(header).row
        if predicate(row):
            roots[header.trace_id] = row
    return roots


async def connected(client: LangfuseClient) -> LangfuseClient:
    """The client, connected (start-up done)."""
    await client.connect()
    return client


async def roots_of(
    client: Any, window: TimeWindow = ALL_TIME, trace_filter: TraceFilter = PRODUCTION
) -> list[TraceRoot]:
    return [root async for root in client.reads.list_trace_roots(window, trace_filter)]


# --- start-up and every route ---------------------------------------------------------------------------


async def _exercise(client: Any) -> None:
    """Every read and write the adapter offers, as the worker will use them."""
    roots = await roots_of(client)
    roots += await roots_of(client, trace_filter=TraceFilter(exclude_environments=("dev",), tags=("refund",)))
    assert roots
    traces = [t async for t in client.reads.fetch_traces(roots)]
    assert all(t.rows for t in traces)
    _ = [t async for t in client.reads.fetch_traces(roots[:1])]
    dataset = await client.reads.get_dataset("agent-bench")
    experiments = [e async for e in client.reads.list_experiments([dataset], since=ALL_TIME.start)]
    assert len(experiments) == 2
    for experiment in experiments:
        items = [i async for i in client.reads.list_experiment_items(experiment, since=ALL_TIME.start)]
        assert len(items) == 5 * 2
        # v4 answers expectedOutput as a raw JSON string (finding 5); the adapter may not parse it yet.
        expected = [json.loads(e) if isinstance(e := i.expected_output, str) and e else e for i in items]
        assert all(isinstance(e, dict) and e["tool_calls"] for e in expected)
    await client.ensure_score_configs([ScoreConfigSpec("accuracy"), ScoreConfigSpec("pass_at_2")])
    report = await client.post_scores(
        [ScoreToPost(ScoreSubject.trace(r.trace_id), "accuracy", 0.5, r.start_time) for r in roots[:20]]
        + [ScoreToPost(ScoreSubject.run(experiments[0].id), "pass_at_2", 1.0, experiments[0].start_time)]
    )
    assert len(report.accepted) == 21 and report.complete, report


#: The versions whose write path the adapter's list posting fits (4.60) and the legacy default.
LIST_POSTING = {"v4": "4.60.0", "v3": "3.120.0"}


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_every_route_the_adapter_uses_keeps_the_contract(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    lf = start_lf(version=LIST_POSTING[generation], scenario=small_scenario(omit_expected_rate=0.5))
    client = client_for(lf)
    info = await client.connect()
    assert info.generation is ApiGeneration(generation)
    assert info.server_version == ("4.60.0" if generation == "v4" else "3.120.0")
    assert info.project_id == "proj-standin"
    await _exercise(client)
    used = {label for label, outcomes in lf.request_counts().items() if any(o.startswith("2") for o in outcomes)}
    routes = ep.COMMON + (ep.V4_ONLY if generation == "v4" else ep.V3_ONLY)
    assert used == {e.label for e in routes}
    # (Whether the adapter probes v4 routes or goes by /health's version is its own business.)
    assert lf.violations() == []
    # What the adapter counted is what the server saw.
    assert client.stats.total_requests == lf.stats()["total_requests"]
    assert lf.score_summary()["stored"] == 21


# --- reads -------------------------------------------------------------------------------------------------


async def test_roots_page_through_and_duplicate_rows_are_read_once(
    start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    scenario = small_scenario(duplicate_rate=0.5)
    lf = start_lf(scenario=scenario)
    client = await connected(client_for(lf, page_size=7))
    roots = await roots_of(client)
    expected = expected_roots(scenario, production)
    assert sorted(r.trace_id for r in roots) == sorted(expected)
    assert len(roots) == len({r.trace_id for r in roots})
    stats = lf.stats()
    assert stats["rows_served"] > len(expected)  # duplicates were served, and read once
    # newest first, as Langfuse pages them
    starts = [r.start_time for r in roots]
    assert starts == sorted(starts, reverse=True)


async def test_rows_repeated_across_pages_are_read_once(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    scenario = small_scenario(duplicate_rate=0.0)
    lf = start_lf(scenario=scenario, repeat_boundary_rows=True)
    client = await connected(client_for(lf, page_size=10))
    roots = await roots_of(client)
    expected = expected_roots(scenario, production)
    assert sorted(r.trace_id for r in roots) == sorted(expected)
    pages = lf.count("GET /api/public/v2/observations") - 1  # minus the probe request at start-up
    # each page after the first began with the previous page's last row again
    assert lf.stats()["rows_served"] == len(expected) + (pages - 1)


async def test_fetched_traces_are_the_generated_rows_and_extract(
    start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    scenario = small_scenario(deviation_rate=0.0)
    lf = start_lf(scenario=scenario)
    client = await connected(client_for(lf, page_size=50))
    roots = await roots_of(client)
    traces = {t.trace_id: t async for t in client.reads.fetch_traces(roots)}
    (single,) = [t async for t in client.reads.fetch_traces(roots[:1])]
    corpus = Corpus(scenario)
    assert set(traces) == {r.trace_id for r in roots}
    for trace_id, trace in traces.items():
        header = corpus.find(trace_id)
        assert header is not None
        rendered = corpus.render(header)
        assert sorted(r["id"] for r in trace.rows) == sorted(r.row["id"] for r in rendered.records)
        sample = extract_sample(trace.rows)
        assert rendered.task is not None
        assert [(c.name, c.arguments) for c in sample.tool_calls or []] == [
            (s.tool, s.args) for s in rendered.task.steps
        ]
        assert sample.response == rendered.task.answer, header.format
    assert single.rows == traces[single.trace_id].rows


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_filters_select_what_langfuse_would(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    scenario = small_scenario(traces=80, environments={"production": 0.6, "staging": 0.4}, datasets=())
    lf = start_lf(scenario=scenario, generation=generation)
    client = await connected(client_for(lf, page_size=25))

    def tenant(row: dict[str, Any]) -> str:
        return str(row["metadata"]["tenant"])

    cases: list[tuple[TraceFilter, Callable[[dict[str, Any]], bool]]] = [
        (TraceFilter(environments=("staging",)), lambda r: r["environment"] == "staging"),
        (TraceFilter(exclude_environments=("staging",)), lambda r: r["environment"] != "staging"),
        (TraceFilter(trace_name="weather-agent"), lambda r: r["traceName"] == "weather-agent"),
        (TraceFilter(tags=("refund",)), lambda r: "refund" in r["tags"]),
        (TraceFilter(metadata={"tenant": "acme"}), lambda r: tenant(r) == "acme"),
        (
            TraceFilter(environments=("production",), metadata={"tenant": "globex"}),
            lambda r: r["environment"] == "production" and tenant(r) == "globex",
        ),
    ]
    for trace_filter, predicate in cases:
        roots = await roots_of(client, trace_filter=trace_filter)
        expected = expected_roots(scenario, predicate)
        assert expected, trace_filter
        assert sorted(r.trace_id for r in roots) == sorted(expected), trace_filter


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_experiments_give_every_attempt_with_its_expected_output(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    scenario = small_scenario()
    lf = start_lf(scenario=scenario, generation=generation)
    client = await connected(client_for(lf))
    corpus = Corpus(scenario)
    dataset = await client.reads.get_dataset("agent-bench")
    assert dataset.id == corpus.datasets["agent-bench"]["id"]
    experiments = [e async for e in client.reads.list_experiments([dataset], since=ALL_TIME.start)]
    assert {e.id for e in experiments} == {e["id"] for e in corpus.experiments}
    for experiment in experiments:
        items = [i async for i in client.reads.list_experiment_items(experiment, since=ALL_TIME.start)]
        by_item: dict[str, int] = {}
        for item in items:
            by_item[item.dataset_item_id] = by_item.get(item.dataset_item_id, 0) + 1
            assert item.expected_output == corpus.dataset_items[item.dataset_item_id]["expectedOutput"]
        assert by_item == {item_id: 2 for item_id in corpus.dataset_items}  # two attempts of each item
    if generation == "v3":  # items joined to dataset items, each fetched once (cached)
        assert lf.count("GET /api/public/dataset-items/{id}") == len(corpus.dataset_items)


# --- scores ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_scores_are_accepted_and_a_rejected_one_is_reported(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    lf = start_lf(version=LIST_POSTING[generation])
    client = await connected(client_for(lf))
    roots = (await roots_of(client))[:6]
    good = [ScoreToPost(ScoreSubject.trace(r.trace_id), "accuracy", 0.25, r.start_time) for r in roots]
    report = await client.post_scores(good)
    assert len(report.accepted) == 6 and report.complete
    lf.reject_scores("suspect", message="value refused")
    bad = ScoreToPost(ScoreSubject.trace(roots[0].trace_id), "suspect", 1.0, roots[0].start_time)
    report = await client.post_scores([*good[:3], bad])
    assert [r.score.name for r in report.rejected] == ["suspect"]
    assert "value refused" in report.rejected[0].reason
    assert len(report.accepted) == 3
    statuses = lf.request_counts()["POST /api/public/scores" if generation == "v4" else "POST /api/public/ingestion"]
    assert ("207" in statuses) if generation == "v4" else (statuses == {"207": 2})
    stored = {s["traceId"]: s["_writes"] for s in lf.scores(name="accuracy")}
    assert len(stored) == 6
    reposted = {r.trace_id for r in roots[:3]}
    # the bisection (v4: a 207 names no score) resends halves: overwrites, never second copies
    assert all(n >= 2 if trace in reposted else n == 1 for trace, n in stored.items())
    assert lf.score_summary()["duplicate_count"] == 0


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_upsert_rule_same_id_name_and_date_overwrites_another_date_duplicates(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    lf = start_lf(generation=generation)
    client = await connected(client_for(lf))
    root = (await roots_of(client))[0]
    first = ScoreToPost(ScoreSubject.trace(root.trace_id), "accuracy", 0.2, root.start_time)
    again = ScoreToPost(ScoreSubject.trace(root.trace_id), "accuracy", 0.9, root.start_time + timedelta(minutes=1))
    assert first.id == again.id
    for score in (first, again):
        assert (await client.post_scores([score])).complete
    summary = lf.score_summary()
    assert (summary["stored"], summary["writes"], summary["overwrites"], summary["duplicate_count"]) == (1, 2, 1, 0)
    assert lf.scores()[0]["value"] == 0.9
    next_day = ScoreToPost(ScoreSubject.trace(root.trace_id), "accuracy", 0.4, root.start_time + timedelta(days=1))
    assert (await client.post_scores([next_day])).complete
    summary = lf.score_summary()
    assert (summary["stored"], summary["duplicate_count"]) == (2, 1)
    held = lf.scores_by_subject()[(root.trace_id, "accuracy")]
    assert sorted(s["value"] for s in held) == [0.4, 0.9]


async def test_scores_read_back_through_the_packages_own_client(
    start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    lf = start_lf()
    client = await connected(client_for(lf))
    roots = (await roots_of(client))[:3]
    await client.ensure_score_configs([ScoreConfigSpec("ok", data_type="BOOLEAN", min_value=None, max_value=None)])
    scores = [ScoreToPost(ScoreSubject.trace(r.trace_id), "ok", True, r.start_time, data_type="BOOLEAN") for r in roots]
    assert (await client.post_scores(scores)).complete
    api = AsyncLangfuseAPI(base_url=lf.url, username=lf.public_key, password=lf.secret_key)
    page = await api.scores.get_many(trace_id=roots[0].trace_id, fields="details,subject", limit=10)
    assert len(page.data) == 1
    score = page.data[0]
    assert (score.name, score.value, score.data_type) == ("ok", True, "BOOLEAN")
    assert score.subject is not None and score.subject.id == roots[0].trace_id


# --- OTLP ---------------------------------------------------------------------------------------------------


async def test_judge_traces_arrive_over_otlp_from_the_langfuse_package(start_lf: StartLangfuse) -> None:
    from trace_scorer.judge.tracing import JudgeTracer
    from trace_scorer.providers.usage import Usage

    lf = start_lf()
    tracer = JudgeTracer(
        public_key=lf.public_key, secret_key=lf.secret_key, base_url=lf.url, environment="trace-scorer"
    )
    scope = tracer.start("agent_goal_accuracy", input={"trace": "t1"}, metadata={"metric": "agent_goal_accuracy"})
    generation = scope.generation("goal", model="judge-a", messages=[{"role": "user", "content": "hi"}], parameters={})
    generation.done('{"verdict": 1}', Usage(10, 2, 1, None))
    scope.end(output={"verdict": 1})
    await asyncio.to_thread(tracer.shutdown)
    otel = lf.otel()
    assert otel["spans"] == 2 and otel["requests"] >= 1
    names = {s["name"] for s in otel["summaries"]}
    assert names == {"agent_goal_accuracy", "goal"}
    assert any(s["attributes"].get("langfuse.environment") == "trace-scorer" for s in otel["summaries"])


async def test_otlp_json_is_accepted_and_counted(start_lf: StartLangfuse) -> None:
    lf = start_lf()
    span = {"traceId": "0" * 32, "spanId": "1" * 16, "name": "s", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    body = {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"}, "spans": [span]}]}]
    }
    async with httpx.AsyncClient(auth=(lf.public_key, lf.secret_key)) as http:
        response = await http.post(f"{lf.url}/api/public/otel/v1/traces", json=body)
    assert response.status_code == 200 and response.json() == {}
    assert lf.otel()["spans"] == 1


# --- the contract, auth -----------------------------------------------------------------------------------


async def test_requests_outside_the_contract_are_refused_and_recorded(start_lf: StartLangfuse) -> None:
    lf = start_lf()
    async with httpx.AsyncClient(base_url=lf.url, auth=(lf.public_key, lf.secret_key)) as http:
        unknown_param = await http.get("/api/public/v2/observations", params={"orderBy": "startTime"})
        bad_type = await http.get("/api/public/v2/observations", params={"limit": "many"})
        bad_body = await http.post("/api/public/scores", json=[])
        no_route = await http.get("/api/public/v9/nothing")
    assert [r.status_code for r in (unknown_param, bad_type, bad_body, no_route)] == [400, 400, 400, 404]
    assert "orderBy" in unknown_param.json()["message"]
    assert no_route.headers["content-type"].startswith("text/html")  # Next.js's own 404 page
    violations = lf.violations()
    assert len(violations) == 4
    assert any("non-empty JSON list" in v for v in violations)
    lf.reset()  # recorded as they should be: clear them for the fixture's zero-violation check


async def test_wrong_keys_get_401_with_a_clear_message(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    lf = start_lf()
    client = client_for(lf, secret="sk-lf-wrong")
    with pytest.raises(LangfuseAuthError, match="Invalid credentials"):
        await client.connect()
    assert lf.request_counts()["GET /api/public/health"] == {"401": 1}


# --- faults -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_429s_are_waited_out_as_retry_after_says(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    lf = start_lf(generation=generation)
    client = await connected(client_for(lf, page_size=20))
    lf.set_faults(rate_429=0.3, retry_after=0.1, seed=3)
    started = time.monotonic()
    roots = await roots_of(client)
    traces = [t async for t in client.reads.fetch_traces(roots[:12])]
    report = await client.post_scores(
        [ScoreToPost(ScoreSubject.trace(r.trace_id), "accuracy", 0.5, r.start_time) for r in roots]
    )
    elapsed = time.monotonic() - started
    assert len(traces) == 12 and report.complete and len(report.accepted) == len(roots)
    stats = lf.stats()
    assert stats["rate_limited_count"] >= 3
    assert stats["early"] == []  # no retry came before its Retry-After had passed
    assert stats["retries_honoured"] == stats["rate_limited_count"]  # and every 429'd request came back
    assert elapsed >= 0.1 * stats["rate_limited_count"] * 0.9  # the waits were real (sequential requests)
    assert client.stats.total_retries == stats["rate_limited_count"]


async def test_a_plan_limit_is_met_with_waits_not_failures(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    lf = start_lf()
    client = await connected(client_for(lf, page_size=5, per_trace_fetch_max=100))
    lf.set_faults(requests_per_window=8, window_seconds=0.5)
    roots = await roots_of(client)
    traces = [t async for t in client.reads.fetch_traces(roots[:10])]
    assert len(roots) == 60 and len(traces) == 10
    stats = lf.stats()
    assert stats["rate_limited_count"] > 0 and stats["early"] == []
    assert all(0 < r["retry_after"] <= 0.5 for r in stats["rate_limited"])


async def test_a_retry_before_retry_after_is_detected(start_lf: StartLangfuse) -> None:
    lf = start_lf()
    lf.script_faults(ScriptedFault("429", route="GET /api/public/health", retry_after=0.5))
    async with httpx.AsyncClient(base_url=lf.url, auth=(lf.public_key, lf.secret_key)) as http:
        first = await http.get("/api/public/health")
        hasty = await http.get("/api/public/health")  # the same request again, at once
    assert (first.status_code, first.headers["retry-after"], hasty.status_code) == (429, "0.5", 200)
    early = lf.early_requests()
    assert len(early) == 1 and early[0]["route"] == "GET /api/public/health" and early[0]["early_by"] > 0.3
    sent = lf.rate_limited()
    assert len(sent) == 1 and sent[0]["retry_after"] == 0.5


@pytest.mark.parametrize("generation", ["v4", "v3"])
async def test_5xx_and_dropped_connections_are_retried_and_nothing_is_lost(
    generation: str, start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    scenario = small_scenario()
    lf = start_lf(generation=generation, scenario=scenario)
    client = await connected(client_for(lf, page_size=20))
    lf.set_faults(rate_5xx=0.1, rate_drop=0.1, rate_reset=0.05, seed=5)
    roots = await roots_of(client)
    traces = [t async for t in client.reads.fetch_traces(roots)]
    report = await client.post_scores(
        [ScoreToPost(ScoreSubject.trace(r.trace_id), "accuracy", 0.5, r.start_time) for r in roots]
    )
    expected = expected_roots(scenario, production)
    assert sorted(r.trace_id for r in roots) == sorted(expected)
    assert {t.trace_id for t in traces} == set(expected) and all(t.rows for t in traces)
    assert report.complete and len(report.accepted) == len(expected)
    outcomes: dict[str, int] = {}
    for by_outcome in lf.request_counts().values():
        for outcome, n in by_outcome.items():
            outcomes[outcome] = outcomes.get(outcome, 0) + n
    assert outcomes.get("503", 0) and outcomes.get("dropped", 0) and outcomes.get("reset", 0)
    assert lf.score_summary()["stored"] == len(expected)


async def test_latency_is_added_to_every_answer(start_lf: StartLangfuse) -> None:
    lf = start_lf()
    lf.set_faults(latency=0.3)
    async with httpx.AsyncClient(base_url=lf.url, auth=(lf.public_key, lf.secret_key)) as http:
        started = time.monotonic()
        await http.get("/api/public/health")
        assert time.monotonic() - started >= 0.3
        lf.clear_faults()
        started = time.monotonic()
        await http.get("/api/public/health")
        assert time.monotonic() - started < 0.3


# --- time: late and live data -------------------------------------------------------------------------------


async def test_late_observations_appear_only_after_their_delay(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    now = datetime.now(UTC)
    base = small_scenario(traces=3, spacing=1.0, end=(now - timedelta(minutes=5)).isoformat(), duplicate_rate=0.0)
    corpus = Corpus(base)
    last_end = max(
        datetime.fromisoformat(r.row["endTime"]) for h in corpus.production_headers() for r in corpus.render(h).records
    )
    delay = (now - last_end).total_seconds() + 1.5  # the last late row arrives 1.5 s from now
    scenario = small_scenario(traces=3, spacing=1.0, end=base.end, duplicate_rate=0.0, late_rate=1.0, late_delay=delay)
    lf = start_lf(scenario=scenario)
    client = await connected(client_for(lf, per_trace_fetch_max=5))
    window = TimeWindow(now - timedelta(hours=1), now)
    roots = await roots_of(client, window)
    assert len(roots) == 3  # roots are never late
    early = {t.trace_id: len(t.rows) async for t in client.reads.fetch_traces(roots)}
    assert wait_until(lambda: datetime.now(UTC) > last_end + timedelta(seconds=delay + 0.05), timeout=5)
    later = {t.trace_id: len(t.rows) async for t in client.reads.fetch_traces(roots)}
    for header in corpus.production_headers():
        assert later[header.trace_id] == len(corpus.render(header).records)
    assert sum(early.values()) < sum(later.values())


async def test_live_traces_appear_as_time_passes_unfinished_first(
    start_lf: StartLangfuse, client_for: MakeClient
) -> None:
    """Legacy ingestion (v3, v4 in dual mode with legacy SDKs) shows a trace from its start."""
    now = datetime.now(UTC)
    scenario = small_scenario(traces=0, live=4, spacing=0.4, end=now.isoformat(), datasets=())
    lf = start_lf(scenario=scenario, generation="v3")
    client = await connected(client_for(lf))
    window = TimeWindow(now - timedelta(minutes=1), now + timedelta(minutes=5))
    before = await roots_of(client, window)
    assert wait_until(lambda: datetime.now(UTC) > now + timedelta(seconds=1.7), timeout=5)
    after = await roots_of(client, window)
    assert len(before) < len(after) == 4
    assert all(r.end_time is None for r in after)  # started, not finished: a worker must wait


# --- a separate process -------------------------------------------------------------------------------------


async def test_the_stand_in_runs_as_a_separate_process(start_lf: StartLangfuse, client_for: MakeClient) -> None:
    lf = start_lf(mode="process", generation="v4")
    client = client_for(lf)
    assert (await client.connect()).generation is ApiGeneration.V4
    roots = await roots_of(client)
    report = await client.post_scores(
        [ScoreToPost(ScoreSubject.trace(r.trace_id), "accuracy", 0.5, r.start_time) for r in roots]
    )
    assert report.complete
    assert lf.score_summary()["stored"] == len(roots)
    assert lf.corpus(ids="production")["trace_ids"]
    process = getattr(lf, "process", None)
    assert process is not None and process.pid != 0
    assert lf.violations() == []
    lf.stop()
    assert process.poll() is not None


def test_handles_describe_what_they_hold(start_lf: StartLangfuse) -> None:
    lf: LangfuseHandle = start_lf()
    corpus = lf.corpus(ids="production")
    assert corpus["production_traces"] == 60 and len(corpus["trace_ids"]) == 60
    assert corpus["experiment_traces"] == 2 * 5 * 2
    items = lf.corpus(ids="experiments")["items"]
    assert len(items) == 20
    stats = lf.stats()
    assert json.loads(json.dumps(stats)) == stats


# --- the peer a user would otherwise use ---------------------------------------------------------------------


def test_the_packages_own_batch_evaluation_runs_against_the_stand_in(start_lf: StartLangfuse) -> None:
    """``Langfuse.run_batched_evaluation`` (the benchmark's peer) reads and scores through the same routes."""
    from langfuse import Langfuse
    from langfuse.batch_evaluation import EvaluatorInputs
    from langfuse.experiment import Evaluation

    scenario = small_scenario(datasets=())
    # SDK 5 posts score lists: a server >= 4.59. Its own key: the package keeps one client per key.
    lf = start_lf(scenario=scenario, version="4.60.0", public_key="pk-lf-peer")
    client = Langfuse(public_key=lf.public_key, secret_key=lf.secret_key, base_url=lf.url)

    def mapper(*, item: Any, **_: Any) -> EvaluatorInputs:
        return EvaluatorInputs(input=item.input, output=item.output, expected_output=None, metadata={})

    def length(*, input: Any, output: Any, expected_output: Any = None, metadata: Any = None, **_: Any) -> Evaluation:
        return Evaluation(name="answer_length", value=float(len(output or "")))

    only_roots = json.dumps(
        [
            {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": True},
            {"type": "stringOptions", "column": "environment", "operator": "any of", "value": ["production"]},
        ]
    )
    try:
        result = client.run_batched_evaluation(
            mapper=mapper, evaluators=[length], filter=only_roots, fetch_batch_size=25, max_concurrency=4
        )
        client.flush()
    finally:
        client.shutdown()
    assert result.completed and result.total_items_processed == 60
    assert lf.score_summary()["stored"] == 60  # one score per root observation (its own random ids)
    assert lf.count("GET /api/public/v2/observations") >= 3

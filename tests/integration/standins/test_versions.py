"""The Langfuse stand-in behaves as the real server version it is set to (``LangfuseOptions.version``):
score posting, row visibility, metadata shapes, experiment items, score configs, the upsert merge, the
routes each version has, and 2.x / 3.110 quirks. Plain httpx, so these hold whatever the adapter does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from standins.faults import FaultConfig
from standins.generate import Corpus, DatasetSpec
from standins.langfuse_profile import VERSIONS, profile_for
from standins.langfuse_server import LangfuseOptions, parse_args
from standins.score_store import ScoreStore
from tests.support.standins import StartLangfuse, small_scenario

WINDOW = {"fromStartTime": "2026-10-30T00:00:00Z", "toStartTime": "2026-11-02T00:00:00Z"}


def http(lf: Any, *, auth: bool = True) -> httpx.Client:
    return httpx.Client(base_url=lf.url, auth=(lf.public_key, lf.secret_key) if auth else None, timeout=10)


def score(trace_id: str = "t-1", **extra: Any) -> dict[str, Any]:
    return {"id": "s-1", "traceId": trace_id, "name": "accuracy", "value": 0.5, **extra}


def envelope(body: dict[str, Any], timestamp: str, event_type: str = "score-create") -> dict[str, Any]:
    return {"batch": [{"id": f"e-{body.get('id')}", "type": event_type, "timestamp": timestamp, "body": body}]}


# --- profiles ---------------------------------------------------------------------------------------------


def test_versions_imply_generation_and_generation_a_default_version() -> None:
    assert LangfuseOptions().version == "4.16.0"
    assert LangfuseOptions(generation="v3").version == "3.120.0"
    assert LangfuseOptions(version="2.95.12").generation == "v3"
    assert LangfuseOptions(version="4.60.0").generation == "v4"
    with pytest.raises(ValueError, match="not a v3 server"):
        LangfuseOptions(generation="v3", version="4.16.0")
    with pytest.raises(ValueError, match="unknown profile flags"):
        LangfuseOptions(overrides={"nope": True})
    assert LangfuseOptions(version="4.16.0", overrides={"scores_body": "list"}).profile.scores_body == "list"
    for version in VERSIONS:
        profile = profile_for(version)
        assert profile.scores_body == ("list" if version == "4.60.0" else "single")
        assert profile.span_end_visibility == version.startswith("4.")
    assert profile_for("4.16.0", "dual").legacy_reads == "serve"
    _port, options = parse_args(["--version", "4.16.0", "--write-mode", "dual", "--heavy-read-limit", "100"])
    assert (options.generation, options.write_mode, options.heavy_read_limit) == ("v4", "dual", 100)


# --- 1. POST /scores and /ingestion -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["4.16.0", "3.120.0", "2.95.12"])
def test_before_4_59_scores_take_one_object_and_a_list_gets_zods_400(version: str, start_lf: StartLangfuse) -> None:
    lf = start_lf(version=version)
    before = datetime.now(UTC)
    with http(lf) as client:
        one = client.post("/api/public/scores", json=score(timestamp="2026-01-02T03:04:05Z"))
        many = client.post("/api/public/scores", json=[score(id="s-2")])
    assert (one.status_code, one.json()) == (200, {"id": "s-1"})
    assert many.status_code == 400
    assert many.json() == {
        "message": "Invalid request data",
        "error": [
            {
                "code": "invalid_type",
                "expected": "object",
                "received": "array",
                "path": [],
                "message": "Expected object, received array",
            }
        ],
    }
    (stored,) = lf.scores()
    assert datetime.fromisoformat(stored["timestamp"]) >= before  # zod stripped the body's timestamp
    assert lf.violations() == []


def test_from_4_59_scores_take_a_list(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="4.60.0")
    with http(lf) as client:
        many = client.post("/api/public/scores", json=[score(timestamp="2026-01-02T03:04:05Z")])
        one = client.post("/api/public/scores", json=score(id="s-2"))
    assert (many.status_code, many.json()) == (202, {"message": "Accepted"})
    assert one.status_code == 400 and one.json()["error"][0]["expected"] == "array"
    assert [s["timestamp"] for s in lf.scores()] == ["2026-01-02T03:04:05Z"]


@pytest.mark.parametrize("version", ["2.95.12", "3.120.0", "4.16.0"])
def test_ingestion_takes_scores_on_every_version_with_the_envelopes_timestamp(
    version: str, start_lf: StartLangfuse
) -> None:
    lf = start_lf(version=version)
    with http(lf) as client:
        answer = client.post("/api/public/ingestion", json=envelope(score(), "2026-10-05T06:07:08.000Z"))
        trace = client.post(
            "/api/public/ingestion",
            json=envelope({"id": "t-9", "name": "x"}, "2026-10-05T06:07:08.000Z", "trace-create"),
        )
    assert answer.status_code == 207 and answer.json()["successes"] == [{"id": "e-s-1", "status": 201}]
    (stored,) = lf.scores()
    if version == "2.95.12":  # 2.x drops the score timestamp: the time of the request
        assert stored["timestamp"] > "2026-10-06"
    else:
        assert stored["timestamp"] == "2026-10-05T06:07:08.000Z"
    errors = trace.json()["errors"]
    assert (errors[0]["status"] if errors else None) == (400 if version == "4.16.0" else None)


# --- 2. visibility at span end (v4) ----------------------------------------------------------------------


def test_v4_rows_appear_only_once_their_span_ended_v3_from_the_start() -> None:
    scenario = small_scenario(traces=3, spacing=600, trace_duration=(300, 300))
    v4 = Corpus(scenario, span_end_visibility=True, export_delay=2.0)
    v3 = Corpus(scenario)
    header = next(iter(v4.production_headers()))
    mid, after = header.start + timedelta(seconds=150), header.start + timedelta(seconds=302.5)
    assert v4.render(header).visible_rows(mid) == [] or all(
        r["endTime"] and datetime.fromisoformat(r["endTime"]) + timedelta(seconds=2) <= mid
        for r in v4.render(header).visible_rows(mid)
    )
    assert not any(r["id"] == v4.render(header).root.row["id"] for r in v4.render(header).visible_rows(mid))
    assert v4.render(header).root.visible_rows(header.start + timedelta(seconds=301)) == []
    assert v4.render(header).root.visible_rows(after)[0]["endTime"] is not None
    assert v3.render(header).root.visible_rows(mid)[0]["endTime"] is None  # the started row


def test_production_traces_last_as_configured_and_window_scans_reach_them() -> None:
    scenario = small_scenario(traces=40, spacing=180, trace_duration=(60, 1200))
    corpus = Corpus(scenario)
    durations = [(corpus.render(h).end - h.start).total_seconds() for h in corpus.production_headers()]
    assert min(durations) >= 60 and max(durations) <= 1200 and max(durations) > 600
    assert corpus.max_duration >= timedelta(seconds=1200)


async def test_v4_serves_no_unfinished_roots(start_lf: StartLangfuse) -> None:
    now = datetime.now(UTC)
    scenario = small_scenario(traces=4, spacing=5, end=now.isoformat(), trace_duration=(600, 900), datasets=())
    lf = start_lf(scenario=scenario)
    params = {"fields": "core,basic", "isRootObservation": "true", "fromStartTime": "2026-01-01T00:00:00Z"}
    with http(lf) as client:
        rows = client.get("/api/public/v2/observations", params=params).json()["data"]
    assert rows == []  # all four started in the last 20 s and run for 10+ minutes
    lf3 = start_lf(scenario=scenario, generation="v3")
    with http(lf3) as client:
        traces = client.get("/api/public/traces", params={"fromTimestamp": "2026-01-01T00:00:00Z"}).json()["data"]
    assert len(traces) == 4


# --- 3. flattened metadata ----------------------------------------------------------------------------------


def _row(trace_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"o-{trace_id}",
        "traceId": trace_id,
        "startTime": "2026-11-01T10:00:00.000Z",
        "endTime": "2026-11-01T10:00:01.000Z",
        "projectId": "proj-standin",
        "parentObservationId": None,
        "type": "SPAN",
        "name": "root",
        "level": "DEFAULT",
        "environment": "production",
        "isRootObservation": True,
        "input": '"q"',
        "output": '"a"',
        "metadata": metadata,
    }


NARROW = {"fromStartTime": "2026-11-01T09:59:00Z", "toStartTime": "2026-11-01T10:01:00Z"}


def test_v4_observation_metadata_is_flattened_parsed_and_cut_only_without_io(start_lf: StartLangfuse) -> None:
    lf = start_lf()
    long_text, long_list = "x" * 300, json.dumps(["y" * 50] * 10)
    lf.add_traces([_row("a" * 32, {"a": {"b": 1}, "n": "123", "t": "true", "s": "plain", "long": long_text,
                                   "obj": long_list})])  # fmt: skip
    with http(lf) as client:

        def get(fields: str, expand: str | None = None) -> dict[str, Any]:
            params = {**NARROW, "fields": fields, **({"expandMetadata": expand} if expand else {})}
            (row,) = client.get("/api/public/v2/observations", params=params).json()["data"]
            return dict(row["metadata"])

        with_io, without_io, expanded = get("core,io,metadata"), get("core,metadata"), get("core,metadata", "n")
        nested = client.get(
            "/api/public/v2/observations",
            params={**NARROW, "filter": json.dumps(
                [{"type": "stringObject", "column": "metadata", "key": "a.b", "operator": "=", "value": "1"}])},
        ).json()["data"]  # fmt: skip
    assert {k: with_io[k] for k in ("a.b", "n", "t", "s")} == {"a.b": 1, "n": 123, "t": True, "s": "plain"}
    assert with_io["long"] == long_text and with_io["obj"] == json.loads(long_list)
    assert expanded["long"] == long_text  # expandMetadata: untruncated too
    assert without_io["long"] == long_text[:200] and without_io["obj"] == long_list[:200]  # encoded objects cut
    assert len(nested) == 1


def test_v4_experiment_metadata_has_string_leaves_and_items_raw_io(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(omit_expected_rate=1.0, datasets=(DatasetSpec(items=2, runs=1, attempts=1),))
    lf = start_lf(scenario=scenario)
    fields = "core,io,metadata,itemMetadata,experimentMetadata"
    with http(lf) as client:
        items = client.get("/api/public/experiment-items", params={**WINDOW, "fields": fields}).json()["data"]
        experiments = client.get("/api/public/experiments", params={**WINDOW, "fields": "core,metadata"}).json()
    assert items and all(i["expectedOutput"] == "" for i in items)  # the runner sent none
    assert all(isinstance(i["input"], str) and isinstance(i["output"], str) for i in items)
    for item in items:
        for key in ("experimentItemMetadata", "experimentMetadata"):
            assert item[key] and all(isinstance(v, str) for v in item[key].values())
    assert all(isinstance(v, str) for e in experiments["data"] for v in e["metadata"].values())

    lf2 = start_lf(scenario=small_scenario())
    with http(lf2) as client:
        items = client.get("/api/public/experiment-items", params={**WINDOW, "fields": "core,io"}).json()["data"]
    corpus = Corpus(small_scenario())
    for item in items:
        assert json.loads(item["expectedOutput"]) == corpus.dataset_items[item["experimentItemId"]]["expectedOutput"]


# --- 5. score configs ----------------------------------------------------------------------------------------


def test_score_configs_newest_first_names_not_unique_boolean_true_first(start_lf: StartLangfuse) -> None:
    seeded = (
        {"id": "cfg-old", "name": "accuracy", "dataType": "NUMERIC", "minValue": 0, "maxValue": 1,
         "createdAt": "2026-01-01T00:00:00.000Z"},
        {"id": "cfg-new", "name": "accuracy", "dataType": "NUMERIC", "minValue": 0, "maxValue": 10,
         "createdAt": "2026-06-01T00:00:00.000Z"},
    )  # fmt: skip
    lf = start_lf(score_configs=seeded)
    with http(lf) as client:
        made = client.post("/api/public/score-configs", json={"name": "Genauigkeit é (ß)", "dataType": "BOOLEAN"})
        again = client.post("/api/public/score-configs", json={"name": "Genauigkeit é (ß)", "dataType": "BOOLEAN"})
        too_long = client.post("/api/public/score-configs", json={"name": "x" * 36, "dataType": "BOOLEAN"})
        listed = client.get("/api/public/score-configs").json()["data"]
    assert made.status_code == again.status_code == 200 and made.json()["id"] != again.json()["id"]
    assert made.json()["categories"] == [{"value": 1, "label": "True"}, {"value": 0, "label": "False"}]
    assert too_long.status_code == 400
    assert [c["id"] for c in listed][-2:] == ["cfg-new", "cfg-old"]
    assert sorted([c["id"] for c in listed][:2]) == sorted([made.json()["id"], again.json()["id"]])


@pytest.mark.parametrize(("version", "edge_ok"), [("2.95.12", False), ("4.16.0", True)])
def test_config_ranges_are_exclusive_on_2x_only(version: str, edge_ok: bool, start_lf: StartLangfuse) -> None:
    config = {"id": "cfg-1", "name": "accuracy", "dataType": "NUMERIC", "minValue": 0, "maxValue": 1}
    lf = start_lf(version=version, score_configs=(config,))
    with http(lf) as client:
        edge = client.post("/api/public/scores", json=score(value=1, configId="cfg-1"))
        inside = client.post("/api/public/scores", json=score(id="s-2", value=0.5, configId="cfg-1"))
    assert inside.status_code == 200
    assert (edge.status_code == 200) is edge_ok


# --- 6. the upsert merge --------------------------------------------------------------------------------------


def test_a_reposted_score_merges_like_overwrite_object() -> None:
    store = ScoreStore()
    first = {"id": "s", "name": "n", "traceId": "t", "value": 1, "comment": "why", "environment": "prod",
             "metadata": {"a": 1, "b": {"c": 2}}}  # fmt: skip
    store.upsert(first, "2026-11-01T10:00:00Z", "scores")
    store.upsert({"id": "s", "name": "n", "traceId": "other", "value": 2, "environment": "dev",
                  "metadata": {"b": {"d": 3}}}, "2026-11-01T11:00:00Z", "scores")  # fmt: skip
    (held,) = store.scores.values()
    assert held.body["comment"] == "why"  # absent: kept
    assert held.body["metadata"] == {"a": 1, "b": {"c": 2, "d": 3}}  # deep-merged
    assert (held.body["traceId"], held.body["environment"], held.timestamp) == ("t", "prod", "2026-11-01T10:00:00Z")
    store.upsert({"id": "s", "name": "n", "comment": None, "metadata": {}}, "2026-11-01T12:00:00Z", "scores")
    assert held.body["comment"] is None and held.body["metadata"] == {"a": 1, "b": {"c": 2, "d": 3}}
    store.upsert({"id": "s", "name": "n", "value": 9}, "2026-11-02T00:00:01Z", "scores")  # another UTC day
    assert len(store.scores) == 2
    assert [s.body["value"] for s in store.latest_by_id()] == [9]


# --- 7. which routes each version has --------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.95.12", "3.110.0", "3.120.0"])
def test_legacy_versions_answer_v4_routes_with_nextjs_html_404(version: str, start_lf: StartLangfuse) -> None:
    lf = start_lf(version=version)
    with http(lf) as client:
        answers = [
            client.get("/api/public/v2/observations"),
            client.get("/api/public/experiments", params={"fromStartTime": "2026-01-01T00:00:00Z"}),
            client.get("/api/public/experiment-items", params={"fromStartTime": "2026-01-01T00:00:00Z"}),
        ]
    for answer in answers:
        assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")
        assert "404: This page could not be found" in answer.text


def test_3_150_answers_v2_observations_with_501(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="3.150.0")
    with http(lf) as client:
        observations = client.get("/api/public/v2/observations")
        experiments = client.get("/api/public/experiments", params={"fromStartTime": "2026-01-01T00:00:00Z"})
    assert observations.status_code == 501 and observations.json()["error"] == "NotImplementedError"
    assert experiments.status_code == 404 and experiments.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("write_mode", ["events_only", "dual"])
def test_v4_legacy_reads_404_before_auth_in_events_only_mode(write_mode: str, start_lf: StartLangfuse) -> None:
    lf = start_lf(write_mode=write_mode)
    with http(lf, auth=False) as anonymous, http(lf) as client:
        unauthenticated = anonymous.get("/api/public/traces")
        traces = client.get("/api/public/traces")
        runs = client.get("/api/public/datasets/agent-bench/runs")
    if write_mode == "events_only":
        for answer in (unauthenticated, traces, runs):
            assert answer.status_code == 404
            assert answer.json()["message"].startswith("This endpoint is not available on deployments running in "
                                                       "Langfuse v4 events_only mode.")  # fmt: skip
    else:
        assert unauthenticated.status_code == 401 and traces.status_code == 200 and runs.status_code == 200


# --- 8. 422 on heavy reads -------------------------------------------------------------------------------------


def test_heavy_reads_get_422_when_enabled(start_lf: StartLangfuse) -> None:
    lf = start_lf(heavy_read_limit=100)
    with http(lf) as client:
        heavy = client.get("/api/public/v2/observations", params={"fields": "core,io", "limit": 500})
        light = client.get("/api/public/v2/observations", params={"fields": "core,basic", "limit": 500})
        small = client.get("/api/public/v2/observations", params={"fields": "core,io", "limit": 100})
    assert heavy.status_code == 422
    assert heavy.json() == {
        "message": "Query exceeded resource limits. Narrow the time range or reduce the page size.",
        "error": "Request timed out",
    }
    assert light.status_code == small.status_code == 200


# --- 9. several roots per trace ---------------------------------------------------------------------------------


def test_some_traces_have_two_root_rows(start_lf: StartLangfuse) -> None:
    scenario = small_scenario(multi_root_rate=0.5, datasets=())
    lf = start_lf(scenario=scenario)
    rows: list[dict[str, Any]] = []
    with http(lf) as client:
        params: dict[str, Any] = {**WINDOW, "isRootObservation": "true", "limit": 7, "fields": "core,basic"}
        while True:
            page = client.get("/api/public/v2/observations", params=params).json()
            rows += page["data"]
            if not page["meta"].get("cursor"):
                break
            params["cursor"] = page["meta"]["cursor"]
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_trace.setdefault(row["traceId"], []).append(row)
    corpus = Corpus(scenario)
    twice = {t for t, rs in by_trace.items() if len({r["id"] for r in rs}) == 2}
    assert twice and twice == {h.trace_id for h in corpus.production_headers() if corpus.has_second_root(h.trace_id)}
    assert len(by_trace) == scenario.traces
    starts = [r["startTime"] for r in rows]
    assert starts == sorted(starts, reverse=True)


# --- 10–12. legacy quirks ----------------------------------------------------------------------------------------


def test_v3_runs_keep_updated_at_at_creation(start_lf: StartLangfuse) -> None:
    lf = start_lf(generation="v3")
    with http(lf) as client:
        runs = client.get("/api/public/datasets/agent-bench/runs").json()["data"]
    assert len(runs) == 2 and all(r["updatedAt"] == r["createdAt"] for r in runs)
    assert [r["createdAt"] for r in runs] == sorted((r["createdAt"] for r in runs), reverse=True)


def test_2_95_quirks(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="2.95.12")
    with http(lf) as client:
        project = client.get("/api/public/projects").json()["data"][0]
        item = client.get("/api/public/dataset-items/agent-bench-item-0000").json()
        run_items = client.get("/api/public/dataset-run-items", params={"datasetId": "x", "runName": "y"})
        runs = client.get("/api/public/datasets/agent-bench/runs").json()["data"]
        run = client.get(f"/api/public/datasets/agent-bench/runs/{runs[0]['name']}").json()
        run_score = client.post("/api/public/scores", json={"id": "r", "datasetRunId": runs[0]["id"], "name": "p",
                                                            "value": 1})  # fmt: skip
        otlp = client.post("/api/public/otel/v1/traces", json={"resourceSpans": []})
        v3_scores = client.get("/api/public/v3/scores")
        kept = client.post("/api/public/scores", json=score(metadata={"a": 1}))
    assert "organization" not in project and "metadata" not in project
    assert "mediaReferences" not in item
    assert run_items.status_code == 405
    assert run["datasetRunItems"] and all(i["datasetRunId"] == runs[0]["id"] for i in run["datasetRunItems"])
    assert run_score.status_code == 400 and "traceId" in run_score.json()["message"]
    assert otlp.status_code == v3_scores.status_code == 404 and otlp.headers["content-type"].startswith("text/html")
    assert kept.status_code == 200 and "metadata" not in lf.scores()[0]


@pytest.mark.parametrize(("version", "applied"), [("3.110.0", False), ("3.120.0", True), ("2.95.12", False)])
def test_old_servers_ignore_trace_filters(version: str, applied: bool, start_lf: StartLangfuse) -> None:
    lf = start_lf(version=version, scenario=small_scenario(environments={"production": 1, "dev": 1}, datasets=()))
    conditions = [{"type": "stringOptions", "column": "environment", "operator": "none of", "value": ["dev"]}]
    with http(lf) as client:
        everything = client.get("/api/public/traces", params={"limit": 100}).json()["meta"]["totalItems"]
        filtered = client.get("/api/public/traces", params={"limit": 100, "filter": json.dumps(conditions)}).json()
    assert (filtered["meta"]["totalItems"] < everything) is applied


def test_the_process_cli_passes_version_and_write_mode() -> None:
    from standins.langfuse_server import options_to_argv

    options = LangfuseOptions(
        version="4.16.0", write_mode="dual", export_delay=3.0, overrides={"otlp": False}, more_keys=(("pk-2", "sk-2"),)
    )
    _, rebuilt = parse_args(options_to_argv(options))
    assert (rebuilt.version, rebuilt.write_mode, rebuilt.export_delay) == ("4.16.0", "dual", 3.0)
    assert rebuilt.more_keys == (("pk-2", "sk-2"),)
    assert rebuilt.profile == options.profile


# --- 13. optional: later config checks, rate-limit headers -----------------------------------------------------


def test_async_validation_drops_invalid_scores_silently_and_a_config_renames(start_lf: StartLangfuse) -> None:
    config = {"id": "cfg-1", "name": "accuracy", "dataType": "NUMERIC", "minValue": 0, "maxValue": 1}
    lf = start_lf(score_configs=(config,), overrides={"async_validation": True})
    with http(lf) as client:
        out_of_range = client.post("/api/public/scores", json=score(value=5, configId="cfg-1"))
        renamed = client.post("/api/public/scores", json=score(id="s-2", name="acc", value=1, configId="cfg-1"))
    assert out_of_range.status_code == renamed.status_code == 200
    assert [(s["id"], s["name"]) for s in lf.scores()] == [("s-2", "accuracy")]


def test_429s_carry_langfuses_rate_limit_headers(start_lf: StartLangfuse) -> None:
    lf = start_lf(faults=FaultConfig(rate_429=1.0, retry_after=2))
    with http(lf) as client:
        answer = client.get("/api/public/score-configs")
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "2" and answer.headers["X-RateLimit-Remaining"] == "0"
    assert answer.json()["code"] == "rate_limited" and answer.json()["details"]["retryAfterSeconds"] == 2

"""The Langfuse stand-in in-process (:mod:`standins.inprocess`) answers as it does over loopback, and the
data a test gives it (:meth:`standins.generate.Corpus.add_trace` and the other ``add_…``) is served with
the version's semantics; the scripted faults a test needs (an answer of its own, a request never answered)
work both ways."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from standins.faults import ScriptedFault
from standins.inprocess import answer
from standins.langfuse_server import PUBLIC_KEY, SECRET_KEY, LangfuseApp, LangfuseOptions
from tests.support import langfuse_factories as f
from tests.support.langfuse_factories import at
from tests.support.standins import StartLangfuse, small_scenario

AUTH = (PUBLIC_KEY, SECRET_KEY)
OBSERVATIONS = "/api/public/v2/observations"


def basic(public: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode()}


async def ask(app: LangfuseApp, path: str, **params: Any) -> httpx.Response:
    return await answer(app, httpx.Request("GET", f"http://standin{path}", params=params, headers=basic(*AUTH)))


@pytest.mark.parametrize(
    ("version", "path", "params"),
    [
        ("4.60.0", OBSERVATIONS, {"limit": "7", "fields": "core,basic,io,metadata", "isRootObservation": "true"}),
        ("4.60.0", "/api/public/experiments", {"fromStartTime": "2026-10-01T00:00:00Z"}),
        ("3.120.0", "/api/public/traces", {"limit": "5", "orderBy": "timestamp.asc"}),
        ("3.120.0", "/api/public/datasets/agent-bench/runs", {}),
        ("3.120.0", OBSERVATIONS, {}),  # a v4 route on a v3 server: Next.js's 404
    ],
)
async def test_in_process_answers_are_the_loopback_answers(
    start_lf: StartLangfuse, version: str, path: str, params: dict[str, str]
) -> None:
    scenario = small_scenario()
    over_http = start_lf(version=version, scenario=scenario)
    in_process = LangfuseApp(LangfuseOptions(version=version, scenario=scenario))
    got = await ask(in_process, path, **params)
    async with httpx.AsyncClient(base_url=over_http.url, auth=AUTH) as client:
        expected = await client.get(path, params=params)
    assert got.status_code == expected.status_code
    assert got.headers["content-type"] == expected.headers["content-type"]
    assert got.content == expected.content and got.content
    assert in_process.violations == [] and in_process.unsupported == []


async def test_connection_faults_become_what_httpx_raises_for_them() -> None:
    app = LangfuseApp(LangfuseOptions(version="4.60.0", scenario=small_scenario(traces=2)))
    app.faults.add_script(
        [
            ScriptedFault("reset", route="GET /api/public/health"),
            ScriptedFault("drop", route="GET /api/public/health"),
            ScriptedFault("timeout", route="GET /api/public/health"),
            ScriptedFault("answer", route="GET /api/public/health", status=401, body={"message": "no"}),
            ScriptedFault("answer", route="GET /api/public/health", status=429, headers={"Retry-After": "7"}),
        ]
    )
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await ask(app, "/api/public/health")
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        await ask(app, "/api/public/health")
    with pytest.raises(httpx.ReadTimeout):
        await ask(app, "/api/public/health")
    refused = await ask(app, "/api/public/health")
    assert (refused.status_code, refused.json()) == (401, {"message": "no"})
    limited = await ask(app, "/api/public/health")
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
    assert limited.json() == {"message": "scripted answer (stand-in)"}
    assert (await ask(app, "/api/public/health")).json()["version"] == "4.60.0"  # the script is used up
    counts = app.stats()["requests"]["GET /api/public/health"]
    assert counts == {"reset": 1, "dropped": 1, "timeout": 1, "401": 1, "429": 1, "200": 1}


def test_over_loopback_a_request_never_answered_times_out_and_the_next_is_served(start_lf: StartLangfuse) -> None:
    lf = start_lf(version="4.60.0")
    lf.script_faults(
        ScriptedFault("timeout", route="GET /api/public/health"),
        ScriptedFault("answer", route="GET /api/public/projects", status=403, body={"message": "forbidden"}),
    )
    with httpx.Client(base_url=lf.url, auth=(lf.public_key, lf.secret_key), timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.get("/api/public/health")
        assert client.get("/api/public/health").json()["status"] == "OK"
        refused = client.get("/api/public/projects")
        assert (refused.status_code, refused.json()) == (403, {"message": "forbidden"})
    assert lf.count("GET /api/public/health", "timeout") == 1


async def test_a_tests_rows_are_served_as_given_copies_included_and_on_v4_only_once_ended() -> None:
    app = LangfuseApp(LangfuseOptions(version="4.60.0", scenario=small_scenario(traces=0, datasets=())))
    stale = f.observation("t1-root", "t1", at(10), end=at(20), root=True, output="old", updated=at(21))
    fresh = dict(stale, output='"new"', updatedAt=f.iso(at(30)))
    running = f.observation("t2-root", "t2", at(15), root=True)  # no end: its span was not exported yet
    app.corpus.add_rows([stale, fresh, f.observation("t1-tool", "t1", at(12), end=at(13), parent="t1-root")])
    app.corpus.add_rows([running])
    rows, cursor = [], None
    while True:  # one row a page: the copies of one observation sit at distinct cursor positions
        params = {"limit": "1", "fields": "core,io", **({"cursor": cursor} if cursor else {})}
        page = (await ask(app, OBSERVATIONS, **params)).json()
        rows += page["data"]
        cursor = page["meta"].get("cursor")
        if cursor is None:
            break
    assert [(r["id"], r["output"]) for r in rows] == [("t1-tool", None), ("t1-root", "old"), ("t1-root", '"new"')]

    app.corpus.add_trace([dict(running, endTime=f.iso(at(40)))])  # it ended: served from now on, replaced
    roots = (await ask(app, OBSERVATIONS, isRootObservation="true")).json()["data"]
    assert sorted(r["id"] for r in roots) == ["t1-root", "t1-root", "t2-root"]


async def test_on_v3_a_tests_rows_are_legacy_traces_and_its_runs_are_listed_with_their_items() -> None:
    app = LangfuseApp(LangfuseOptions(version="3.120.0", scenario=small_scenario(traces=0, datasets=())))
    app.corpus.add_rows([f.observation("t1-span", "t1", at(10), trace_name="agent", input={"q": 1})])  # running
    app.corpus.add_dataset(f.dataset("ds-1", "bench"))
    old = f.v3_dataset_run("run-old", "old", "ds-1", "bench", at(-3600))
    new = f.v3_dataset_run("run-new", "new", "ds-1", "bench", at(0))
    for run in (old, new):
        app.corpus.add_dataset_run(run)
    app.corpus.add_dataset_run_item(f.v3_dataset_run_item("ri-1", old, "item-1", "t1", at(10), observation_id="o"))
    (trace,) = (await ask(app, "/api/public/traces")).json()["data"]
    assert (trace["id"], trace["name"], trace["input"], trace["latency"]) == ("t1", "agent", {"q": 1}, None)
    runs = (await ask(app, "/api/public/datasets/bench/runs")).json()["data"]
    assert [(r["id"], r["createdAt"]) for r in runs] == [("run-new", f.iso(at(0))), ("run-old", f.iso(at(-3600)))]
    (item,) = (await ask(app, "/api/public/dataset-run-items", datasetId="ds-1", runName="old")).json()["data"]
    assert (item["id"], item["traceId"], item["observationId"]) == ("ri-1", "t1", "o")
    assert (await ask(app, "/api/public/dataset-run-items", datasetId="ds-1", runName="new")).json()["data"] == []
    assert app.violations == []


async def test_a_project_may_have_several_api_keys() -> None:
    app = LangfuseApp(LangfuseOptions(version="4.60.0", more_keys=(("pk-lf-second", "sk-lf-second"),)))

    async def health(*auth: str) -> int:
        request = httpx.Request("GET", "http://standin/api/public/health", headers=basic(*auth))
        return (await answer(app, request)).status_code

    assert await health(*AUTH) == 200 and await health("pk-lf-second", "sk-lf-second") == 200
    assert await health("pk-lf-second", SECRET_KEY) == 401


def test_score_configs_created_in_process_take_the_servers_clock() -> None:
    moment = datetime(2026, 10, 2, 12, 0, tzinfo=UTC)
    app = LangfuseApp(LangfuseOptions(version="4.60.0", clock=lambda: moment))
    created = app.add_config({"name": "accuracy", "dataType": "NUMERIC", "minValue": 0, "maxValue": 1})
    later = app.add_config({"name": "rouge", "dataType": "NUMERIC", "createdAt": f.iso(moment + timedelta(1))})
    assert (created["id"], created["createdAt"]) == ("cfg-1", "2026-10-02T12:00:00.000Z")
    assert later["id"] == "cfg-2"

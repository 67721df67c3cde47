"""A fake Langfuse behind respx that keeps the contract: every request the client sends and every answer
given is checked (:mod:`standins.contract`), and a violation fails the test.

:class:`FakeLangfuse` routes requests by operation; :class:`V4Server` and :class:`V3Server` are small
in-memory servers with Langfuse's query semantics (windows, filters, cursor or page paging, field
groups, upserting scores), so tests state data, not request sequences. ``fail_next`` injects faults
(429 with Retry-After, 5xx, timeouts, dropped connections) ahead of the normal answers.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

import httpx
import respx

from standins import langfuse_query as q
from standins.contract import Contract, ContractViolation, get_contract
from tests.support import langfuse_factories as f
from tests.support.langfuse_factories import Reply

BASE_URL = "https://langfuse.test"


class Timeout:
    """Fault: the request times out."""


class Disconnect:
    """Fault: the connection drops before an answer."""


Fault = Reply | Timeout | Disconnect
Handler = Callable[[httpx.Request, dict[str, str]], Reply]


@dataclass
class Call:
    method: str
    template: str
    request: httpx.Request
    status: int | str
    #: The fake clock's monotonic time when the request arrived (when a clock is attached).
    at: float | None = None


class FakeLangfuse:
    def __init__(
        self, router: respx.MockRouter, base_url: str = BASE_URL, contract: Contract | None = None
    ) -> None:
        self.base_url = base_url
        self.contract = contract or get_contract()
        self.handlers: dict[tuple[str, str], Handler] = {}
        self.faults: dict[tuple[str, str], deque[Fault]] = defaultdict(deque)
        self.calls: list[Call] = []
        self.violations: list[str] = []
        #: Attach a clock (anything with ``monotonic()``) to record when each request arrived.
        self.clock: Any = None
        router.route(url__startswith=base_url).mock(side_effect=self._dispatch)

    def on(self, method: str, template: str, handler: Handler | Reply | dict[str, Any]) -> None:
        if isinstance(handler, Reply):
            reply = handler
            self.handlers[(method, template)] = lambda request, params: reply
        elif isinstance(handler, dict):
            body = handler
            self.handlers[(method, template)] = lambda request, params: Reply(200, body)
        else:
            self.handlers[(method, template)] = handler

    def fail_next(self, method: str, template: str, *faults: Fault) -> None:
        self.faults[(method, template)].extend(faults)

    def calls_to(self, method: str, template: str) -> list[Call]:
        return [c for c in self.calls if (c.method, c.template) == (method, template)]

    def _dispatch(self, request: httpx.Request) -> httpx.Response:
        try:
            template = self.contract.check_httpx_request(request)
        except ContractViolation as violation:
            self.violations.append(str(violation))
            raise
        key = (request.method, template)
        params = self.contract.api.operation(
            request.method, request.url.raw_path.decode().split("?")[0]
        ).path_params
        call = Call(request.method, template, request, "?", self.clock.monotonic() if self.clock else None)
        self.calls.append(call)
        if self.faults[key]:
            fault = self.faults[key].popleft()
            if isinstance(fault, Timeout):
                call.status = "timeout"
                raise httpx.ReadTimeout("timed out", request=request)
            if isinstance(fault, Disconnect):
                call.status = "connection_error"
                raise httpx.RemoteProtocolError(
                    "Server disconnected without sending a response.", request=request
                )
            reply = fault
        elif key in self.handlers:
            reply = self.handlers[key](request, dict(params))
        else:
            message = f"unexpected request {request.method} {request.url}"
            self.violations.append(message)
            raise AssertionError(message)
        call.status = reply.status
        try:
            if reply.unchecked is None:
                self.contract.check_response(request.method, template, reply.status, reply.json)
        except ContractViolation as violation:
            self.violations.append(str(violation))
            raise
        return httpx.Response(reply.status, json=reply.json, headers=reply.headers)


# --- shared helpers --------------------------------------------------------------------------------


def _params(request: httpx.Request) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for name, value in request.url.params.multi_items():
        values.setdefault(name, []).append(value)
    return values


_one = q.one
_encode_cursor = q.encode_offset_cursor
_decode_cursor = q.decode_offset_cursor


def _not_found(message: str) -> Reply:
    return Reply(404, {"message": message})


def _project(row: dict[str, Any], fields: str | None) -> dict[str, Any]:
    return q.project(row, fields)


class _Common:
    """Endpoints both generations have: health, projects, score configs, datasets, dataset items."""

    def __init__(self, fake: FakeLangfuse, version: str) -> None:
        self.fake = fake
        self.version = version
        self.configs: list[dict[str, Any]] = []
        self.datasets: dict[str, dict[str, Any]] = {}
        self.dataset_items: dict[str, dict[str, Any]] = {}
        fake.on("GET", "/api/public/health", lambda r, p: Reply(200, f.health(self.version)))
        fake.on("GET", "/api/public/projects", lambda r, p: Reply(200, f.projects()))
        fake.on("GET", "/api/public/score-configs", self._list_configs)
        fake.on("POST", "/api/public/score-configs", self._create_config)
        fake.on("GET", "/api/public/v2/datasets/{datasetName}", self._dataset)
        fake.on("GET", "/api/public/dataset-items/{id}", self._dataset_item)

    def add_dataset(self, dataset_id: str, name: str) -> None:
        self.datasets[name] = f.dataset(dataset_id, name)

    def add_dataset_item(self, item: dict[str, Any]) -> None:
        self.dataset_items[item["id"]] = item

    def _list_configs(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        page, limit = int(_one(params, "page") or 1), int(_one(params, "limit") or 50)
        # As Langfuse: newest first (createdAt desc, then id asc); names are not unique.
        ordered = sorted(self.configs, key=lambda c: c["id"])
        ordered.sort(key=lambda c: c["createdAt"], reverse=True)
        chunk = ordered[(page - 1) * limit : page * limit]
        return Reply(200, f.score_configs_page(chunk, page=page, limit=limit, total=len(self.configs)))

    def _create_config(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        body = json.loads(request.content)
        config = f.score_config(
            f"cfg-{len(self.configs) + 1}",
            body["name"],
            data_type=body["dataType"],
            min_value=body.get("minValue"),
            max_value=body.get("maxValue"),
            categories=body.get("categories"),
            created=f.T0 + timedelta(seconds=len(self.configs) + 1),
        )
        self.configs.append(config)
        return Reply(200, config)

    def _dataset(self, request: httpx.Request, params: dict[str, str]) -> Reply:
        name = params["datasetName"]
        return (
            Reply(200, self.datasets[name])
            if name in self.datasets
            else _not_found(f"dataset {name} not found")
        )

    def _dataset_item(self, request: httpx.Request, params: dict[str, str]) -> Reply:
        item = self.dataset_items.get(params["id"])
        return Reply(200, item) if item else _not_found("dataset item not found")


# --- v4 ------------------------------------------------------------------------------------------


class V4Server(_Common):
    """Observations (v2), experiments, experiment items and batch scores, as Langfuse v4 serves them."""

    def __init__(self, fake: FakeLangfuse, version: str = "4.60.0") -> None:
        super().__init__(fake, version)
        self.observations: list[dict[str, Any]] = []
        self.experiments: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        #: Accepted scores by id (a re-post with the same id overwrites, as Langfuse upserts).
        self.scores: dict[str, dict[str, Any]] = {}
        self.score_posts: list[list[dict[str, Any]]] = []
        #: Returns a rejection message for a score body, or None to accept it.
        self.reject_score: Callable[[dict[str, Any]], str | None] = lambda body: None
        fake.on("GET", "/api/public/v2/observations", self._observations)
        fake.on("GET", "/api/public/experiments", self._experiments)
        fake.on("GET", "/api/public/experiment-items", self._items)
        fake.on("POST", "/api/public/scores", self._post_scores)
        # v4 servers still take score-create events (what servers before the list endpoint are sent).
        fake.on("POST", "/api/public/ingestion", self._ingest)
        self.events: list[dict[str, Any]] = []

    def _ingest(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        successes, errors = [], []
        for event in json.loads(request.content)["batch"]:
            self.events.append(event)
            rejection = self.reject_score(event["body"])
            if rejection:
                errors.append((event["id"], 400, rejection))
            else:
                successes.append(event["id"])
                self.scores[event["body"]["id"]] = {**event["body"], "timestamp": event["timestamp"]}
        return f.ingestion_response(successes, errors)

    def _observations(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        if _one(params, "parseIoAsJson") == "true":
            return Reply(400, {"message": "parseIoAsJson is deprecated"})
        rows = [r for r in self.observations if _observation_matches(r, params)]
        rows.sort(
            key=lambda r: datetime.fromisoformat(r["startTime"]), reverse=True
        )  # stable: duplicates stay adjacent
        limit = int(_one(params, "limit") or 50)
        if limit > 1000:
            return Reply(400, {"message": "limit must be at most 1000"})
        offset = _decode_cursor(_one(params, "cursor"))
        page = [_project(r, _one(params, "fields")) for r in rows[offset : offset + limit]]
        cursor = _encode_cursor(offset + limit) if offset + limit < len(rows) else None
        return Reply(200, f.observations_page(page, cursor))

    def _experiments(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        limit = int(_one(params, "limit") or 50)
        if limit > 100:
            return Reply(400, {"message": "limit must be at most 100"})
        # As Langfuse: start/end/itemCount computed within the requested window.
        out = q.experiments_in_window(self.experiments, self.items, params)
        offset = _decode_cursor(_one(params, "cursor"))
        cursor = _encode_cursor(offset + limit) if offset + limit < len(out) else None
        fields = _one(params, "fields")
        page = [q.project_experiment(e, fields) for e in out[offset : offset + limit]]
        return Reply(200, f.experiments_page(page, cursor))

    def _items(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        limit = int(_one(params, "limit") or 50)
        if limit > 100:
            return Reply(400, {"message": "limit must be at most 100"})
        rows = q.experiment_items_matching(self.items, params)
        offset = _decode_cursor(_one(params, "cursor"))
        cursor = _encode_cursor(offset + limit) if offset + limit < len(rows) else None
        fields = _one(params, "fields")
        page = [q.project_experiment_item(r, fields) for r in rows[offset : offset + limit]]
        return Reply(200, f.experiment_items_page(page, cursor))

    def _post_scores(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        body = json.loads(request.content)
        self.score_posts.append(body)
        messages = []
        for score in body:
            message = self.reject_score(score)
            if message:
                messages.append(message)
            else:
                self.scores[score["id"]] = score
        if messages:
            return f.scores_partial(len(body) - len(messages), messages)
        return f.scores_accepted()


def _observation_matches(row: dict[str, Any], params: dict[str, list[str]]) -> bool:
    try:
        return q.observation_matches(row, params)
    except q.UnsupportedQuery as error:
        raise AssertionError(f"the fake does not know this query: {error}") from None


# --- v3 ------------------------------------------------------------------------------------------


class V3Server(_Common):
    """Legacy traces, dataset runs, run items and batch ingestion, as a self-hosted v3 serves them."""

    def __init__(self, fake: FakeLangfuse, version: str = "3.120.0") -> None:
        super().__init__(fake, version)
        #: Full traces (``/traces/{id}`` answers) by id.
        self.traces: dict[str, dict[str, Any]] = {}
        #: Dataset runs by dataset name.
        self.runs: dict[str, list[dict[str, Any]]] = {}
        self.run_items: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        #: Accepted scores by id (the body of their last event, with the event timestamp).
        self.scores: dict[str, dict[str, Any]] = {}
        self.reject_event: Callable[[dict[str, Any]], tuple[int, str] | None] = lambda event: None
        gone = _not_found("not found (this is a v3 server)")
        for method, template in (
            ("GET", "/api/public/v2/observations"),
            ("GET", "/api/public/experiments"),
            ("GET", "/api/public/experiment-items"),
            ("POST", "/api/public/scores"),
        ):
            fake.on(method, template, gone)
        fake.on("GET", "/api/public/traces", self._traces)
        fake.on("GET", "/api/public/traces/{traceId}", self._trace)
        fake.on("GET", "/api/public/datasets/{datasetName}/runs", self._runs)
        fake.on("GET", "/api/public/dataset-run-items", self._run_items)
        fake.on("GET", "/api/public/datasets/{datasetName}/runs/{runName}", self._run)
        fake.on("POST", "/api/public/ingestion", self._ingest)

    def add_trace(self, trace: dict[str, Any]) -> None:
        self.traces[trace["id"]] = trace

    def _traces(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        try:
            rows = [t for t in self.traces.values() if q.v3_trace_matches(t, params)]
        except q.UnsupportedQuery as error:
            raise AssertionError(f"the fake does not know this query: {error}") from None
        rows.sort(key=lambda t: t["timestamp"], reverse=_one(params, "orderBy") != "timestamp.asc")
        page, limit = int(_one(params, "page") or 1), int(_one(params, "limit") or 50)
        return Reply(
            200,
            f.v3_traces_page(
                rows[(page - 1) * limit : page * limit], page=page, limit=limit, total=len(rows)
            ),
        )

    def _trace(self, request: httpx.Request, params: dict[str, str]) -> Reply:
        trace = self.traces.get(unquote(params["traceId"]))
        return Reply(200, trace) if trace else _not_found("trace not found")

    def _runs(self, request: httpx.Request, path: dict[str, str]) -> Reply:
        params = _params(request)
        # As Langfuse: newest (createdAt) first; a run's updatedAt is its createdAt (never updated).
        runs = sorted(self.runs.get(path["datasetName"], []), key=lambda r: r["createdAt"], reverse=True)
        page, limit = int(_one(params, "page") or 1), int(_one(params, "limit") or 50)
        return Reply(
            200,
            f.v3_dataset_runs_page(
                runs[(page - 1) * limit : page * limit], page=page, limit=limit, total=len(runs)
            ),
        )

    def _run_items(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        dataset_id, run_name = _one(params, "datasetId"), _one(params, "runName")
        run_ids = {
            r["id"]
            for runs in self.runs.values()
            for r in runs
            if r["datasetId"] == dataset_id and r["name"] == run_name
        }
        rows = [i for i in self.run_items if i["datasetRunId"] in run_ids]
        page, limit = int(_one(params, "page") or 1), int(_one(params, "limit") or 50)
        return Reply(
            200,
            f.v3_dataset_run_items_page(
                rows[(page - 1) * limit : page * limit], page=page, limit=limit, total=len(rows)
            ),
        )

    def _run(self, request: httpx.Request, path: dict[str, str]) -> Reply:
        name, run_name = unquote(path["datasetName"]), unquote(path["runName"])
        run = next((r for r in self.runs.get(name, []) if r["name"] == run_name), None)
        if run is None:
            return _not_found("dataset run not found")
        items = [i for i in self.run_items if i["datasetRunId"] == run["id"]]
        return Reply(200, f.v3_dataset_run_with_items(run, items))

    def _ingest(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        batch = json.loads(request.content)["batch"]
        successes, errors = [], []
        for event in batch:
            self.events.append(event)
            rejection = self.reject_event(event)
            if rejection:
                errors.append((event["id"], rejection[0], rejection[1]))
            else:
                successes.append(event["id"])
                self.scores[event["body"]["id"]] = {**event["body"], "timestamp": event["timestamp"]}
        return f.ingestion_response(successes, errors)


class V2Server(V3Server):
    """Langfuse 2.x (2.95): the legacy API with older answer shapes.

    ``/dataset-run-items`` answers 405 (a run's items come with ``/datasets/{name}/runs/{run}``), and
    dataset items have no ``mediaReferences`` (which the package's ``DatasetItem`` model requires).
    """

    def __init__(self, fake: FakeLangfuse, version: str = "2.95.12") -> None:
        super().__init__(fake, version)
        fake.on("GET", "/api/public/dataset-run-items", Reply(405, {"message": "Method Not Allowed"}))

    def _dataset_item(self, request: httpx.Request, params: dict[str, str]) -> Reply:
        item = self.dataset_items.get(params["id"])
        if not item:
            return _not_found("dataset item not found")
        old = {k: v for k, v in item.items() if k != "mediaReferences"}
        return Reply(200, old, unchecked="Langfuse 2.95 sends no mediaReferences")


"""A fake Langfuse behind respx that keeps the contract: every request the client sends and every answer
given is checked (:mod:`tests.contract`), and a violation fails the test.

:class:`FakeLangfuse` routes requests by operation; :class:`V4Server` and :class:`V3Server` are small
in-memory servers with Langfuse's query semantics (windows, filters, cursor or page paging, field
groups, upserting scores), so tests state data, not request sequences. ``fail_next`` injects faults
(429 with Retry-After, 5xx, timeouts, dropped connections) ahead of the normal answers.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

import httpx
import respx

from tests.contract import Contract, ContractViolation, get_contract
from tests.langfuse import factories as f
from tests.langfuse.factories import Reply

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


def _one(params: dict[str, list[str]], name: str) -> str | None:
    return params[name][0] if name in params else None


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _encode_cursor(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    return int(json.loads(base64.b64decode(cursor))["offset"]) if cursor else 0


def _not_found(message: str) -> Reply:
    return Reply(404, {"message": message})


_GROUPS = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name",
        "level",
        "statusMessage",
        "version",
        "environment",
        "bookmarked",
        "public",
        "userId",
        "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("model", "internalModelId", "modelParameters"),
    "trace_context": ("tags", "release", "traceName"),
}


def _project(row: dict[str, Any], fields: str | None) -> dict[str, Any]:
    groups = {"core", *(fields or "core,basic").split(",")}
    keep = {key for group in groups for key in _GROUPS.get(group, ())}
    return {key: value for key, value in row.items() if key in keep}


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
        chunk = self.configs[(page - 1) * limit : page * limit]
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
        start, end = _time(_one(params, "fromStartTime")), _time(_one(params, "toStartTime"))
        dataset_ids = set((_one(params, "datasetId") or "").split(",")) - {""}
        out = []
        for experiment in self.experiments:
            if dataset_ids and experiment["datasetId"] not in dataset_ids:
                continue
            items = [
                i
                for i in self.items
                if i["experimentId"] == experiment["id"] and _in(i["startTime"], start, end)
            ]
            if not items:
                continue
            times = sorted(datetime.fromisoformat(i["startTime"]) for i in items)
            # As Langfuse: start/end/itemCount computed within the requested window.
            out.append(
                {
                    **experiment,
                    "startTime": f.iso(times[0]),
                    "endTime": f.iso(times[-1]),
                    "itemCount": len(items),
                }
            )
        out.sort(key=lambda e: e["endTime"], reverse=True)
        offset = _decode_cursor(_one(params, "cursor"))
        cursor = _encode_cursor(offset + limit) if offset + limit < len(out) else None
        fields = set((_one(params, "fields") or "core").split(","))
        page = [
            e if "metadata" in fields else {k: v for k, v in e.items() if k != "metadata"}
            for e in out[offset : offset + limit]
        ]
        return Reply(200, f.experiments_page(page, cursor))

    def _items(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        limit = int(_one(params, "limit") or 50)
        if limit > 100:
            return Reply(400, {"message": "limit must be at most 100"})
        start, end = _time(_one(params, "fromStartTime")), _time(_one(params, "toStartTime"))
        experiment_ids = set((_one(params, "experimentId") or "").split(",")) - {""}
        rows = [
            i
            for i in self.items
            if (not experiment_ids or i["experimentId"] in experiment_ids) and _in(i["startTime"], start, end)
        ]
        rows.sort(key=lambda r: r["startTime"], reverse=True)
        offset = _decode_cursor(_one(params, "cursor"))
        cursor = _encode_cursor(offset + limit) if offset + limit < len(rows) else None
        fields = set((_one(params, "fields") or "core,dataset").split(","))
        drop = set()
        if "io" not in fields:
            drop |= {"input", "output", "expectedOutput"}
        if "metadata" not in fields:
            drop.add("metadata")
        if "itemMetadata" not in fields:
            drop.add("experimentItemMetadata")
        page = [{k: v for k, v in r.items() if k not in drop} for r in rows[offset : offset + limit]]
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


def _in(value: str, start: datetime | None, end: datetime | None) -> bool:
    moment = datetime.fromisoformat(value)
    return (start is None or moment >= start) and (end is None or moment < end)


def _observation_matches(row: dict[str, Any], params: dict[str, list[str]]) -> bool:
    start, end = _time(_one(params, "fromStartTime")), _time(_one(params, "toStartTime"))
    if not _in(row["startTime"], start, end):
        return False
    simple = {"traceId": "traceId", "userId": "userId", "name": "name", "type": "type"}
    for param, column in simple.items():
        if param in params and row.get(column) != params[param][0]:
            return False
    if _one(params, "isRootObservation") == "true" and not row.get("isRootObservation"):
        return False
    if "environment" in params and row.get("environment") not in params["environment"]:
        return False
    return all(_condition_holds(row, condition) for condition in json.loads(_one(params, "filter") or "[]"))


def _condition_holds(row: dict[str, Any], c: dict[str, Any]) -> bool:
    kind, column, operator = c["type"], c["column"], c["operator"]
    value: Any = c.get("value")
    if kind == "datetime" and column == "startTime":
        moment, bound = datetime.fromisoformat(row["startTime"]), datetime.fromisoformat(value)
        return {">=": moment >= bound, "<": moment < bound, ">": moment > bound, "<=": moment <= bound}[
            operator
        ]
    if kind == "boolean" and column == "isRootObservation":
        return bool(bool(row.get("isRootObservation")) == value)
    if kind == "stringOptions" and column == "environment":
        return bool((row.get("environment") in value) == (operator == "any of"))
    if kind == "string" and operator == "=" and column in ("traceName", "userId", "name"):
        return bool(row.get(column) == value)
    if kind == "arrayOptions" and column in ("tags", "traceTags") and operator == "all of":
        return bool(set(value) <= set(row.get("tags") or []))
    if kind == "stringObject" and column == "metadata" and operator == "=":
        return bool((row.get("metadata") or {}).get(c["key"]) == value)
    raise AssertionError(f"the fake does not know filter condition {c}")


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
        fake.on("POST", "/api/public/ingestion", self._ingest)

    def add_trace(self, trace: dict[str, Any]) -> None:
        self.traces[trace["id"]] = trace

    def _traces(self, request: httpx.Request, _: dict[str, str]) -> Reply:
        params = _params(request)
        start, end = _time(_one(params, "fromTimestamp")), _time(_one(params, "toTimestamp"))
        rows = []
        for trace in self.traces.values():
            if not _in(trace["timestamp"], start, end):
                continue
            if "name" in params and trace["name"] != params["name"][0]:
                continue
            if "userId" in params and trace["userId"] != params["userId"][0]:
                continue
            if "tags" in params and not set(params["tags"]) <= set(trace["tags"]):
                continue
            if "environment" in params and trace["environment"] not in params["environment"]:
                continue
            if not all(_v3_condition(trace, c) for c in json.loads(_one(params, "filter") or "[]")):
                continue
            rows.append(trace)
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
        runs = self.runs.get(path["datasetName"], [])
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


def _v3_condition(trace: dict[str, Any], c: dict[str, Any]) -> bool:
    kind, column, operator = c["type"], c["column"], c["operator"]
    value: Any = c.get("value")
    if kind == "datetime" and column == "timestamp":
        moment, bound = datetime.fromisoformat(trace["timestamp"]), datetime.fromisoformat(value)
        return {">=": moment >= bound, "<": moment < bound}[operator]
    if kind == "stringOptions" and column == "environment":
        return bool((trace["environment"] in value) == (operator == "any of"))
    if kind == "string" and operator == "=" and column in ("name", "userId"):
        return bool(trace.get(column) == value)
    if kind == "arrayOptions" and column == "tags" and operator == "all of":
        return bool(set(value) <= set(trace.get("tags") or []))
    if kind == "stringObject" and column == "metadata" and operator == "=":
        return bool((trace.get("metadata") or {}).get(c["key"]) == value)
    raise AssertionError(f"the fake does not know filter condition {c}")


class FakeClock:
    """Time that moves only when slept on: tests read the waits instead of waiting."""

    def __init__(self, wall: datetime | None = None) -> None:
        self.elapsed = 0.0
        self.wall = wall or f.T0 + timedelta(days=1)
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.elapsed

    def now(self) -> datetime:
        return self.wall + timedelta(seconds=self.elapsed)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.elapsed += seconds

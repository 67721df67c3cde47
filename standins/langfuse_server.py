"""A Langfuse stand-in: a real HTTP server on 127.0.0.1 that behaves as a given real server version.

**Versions.** ``LangfuseOptions(version=…)`` picks one of 2.95.12, 3.110.0, 3.120.0, 3.150.0, 4.16.0,
4.60.0 (``generation="v4"`` alone means 4.16.0, ``"v3"`` 3.120.0; a version implies its generation).
What each does is a :class:`standins.langfuse_profile.ServerProfile` (the table is in that module); any
flag can be changed with ``overrides``. In short:

- **4.x** (v4 routes): rows of ``/v2/observations`` appear only when their span ended (OTel export;
  ``endTime + export_delay``, no "started" rows); metadata flattened to dotted keys (leaves JSON-parsed;
  cut to 200 characters only without ``io`` and ``expandMetadata``); ``/experiments`` and
  ``/experiment-items`` metadata flattened with string leaves, items' ``input``/``output``/
  ``expectedOutput`` raw strings (``""`` when none). ``write_mode="events_only"`` (default): the legacy
  reads answer 404 before authentication and ``/ingestion`` takes only ``score-create``; ``"dual"``: the
  legacy reads are served as on v3. ``POST /scores``: 4.16 takes one object (200 ``{id}``, a list → zod
  400, ``timestamp`` stripped); 4.60 takes a list (202, or 207 with per-batch counts).
- **3.x / 2.x** (legacy routes ``/traces``, ``/traces/{id}``, ``/observations``,
  ``/datasets/{name}/runs[/{runName}]``, ``/dataset-run-items``): traces visible from their start;
  ``/observations`` pages by offset (``limit`` ≤ 100, ties in ``startTime`` reordered on every page; 3.x
  answers unmerged duplicates side by side, 2.x its own row shape); ``POST /scores`` one object; the v4 routes
  answer Next.js's HTML 404 (3.150: ``/v2/observations`` → 501 ``NotImplementedError``); dataset runs
  keep ``updatedAt = createdAt``. 3.110 ignores ``filter`` on ``/traces``. 2.95: see the profile table.
- **Every version:** health, projects, score configs (newest first, names not unique, BOOLEAN
  ``True=1, False=0``, Unicode names ≤ 35), ``/v2/datasets/{name}``, ``/dataset-items/{id}``,
  ``GET /v3/scores`` (not 2.x; reads de-duplicate by id; filters by source, queue and annotator; people's
  ANNOTATION scores seeded by ``add_annotation``), annotation queues' items (not 2.x; ``add_queue``;
  ``POST …/items`` adds an item each time, duplicates too), ``POST /ingestion`` score-create (4.5 MB, the
  score's timestamp is the envelope's), OTLP (not 2.x). A route the version lacks, or the stand-in does
  not know, answers Next.js's HTML 404. Options: ``heavy_read_limit`` / ``heavy_read_bytes`` (422 on
  heavy ``/v2/observations`` reads), ``score_configs`` (pre-seeded, with ``createdAt``), fault injection.
- **4.x only:** ``GET /unstable/evaluators`` (the 22 managed evaluators and the project's, latest version
  of each) and ``/unstable/evaluation-rules`` (v4 and legacy shapes), page/limit
  (:mod:`standins.langfuse_evaluators`; options ``evaluators``, ``evaluation_rules``).

**Contract.** Every request is checked against :mod:`standins.contract` (``POST /scores``: one object or
a list of the package's ``CreateScoreRequest`` — which one the version accepts is its own answer, not a
violation) and every answer against the ``langfuse`` package's models (v4) or ours (v3; 2.x answers the
package refuses are not checked). A violation is answered
400 with the reason and recorded (``GET /_standin/stats`` → ``violations``); a test asserts there are none.

**Data.** From :class:`standins.generate.Corpus` (seeded, lazy), plus traces a test adds. Scores are
stored with Langfuse's upsert-and-merge rule (:mod:`standins.score_store`) and validated as Langfuse
does (config name/type/range, BOOLEAN 0/1, TEXT length, ``observationId`` needs ``traceId``, no
``EVAL`` source); ``overrides={"async_validation": True}`` moves the config checks after the answer
(invalid scores dropped silently, a config's name wins).

Run as a process::

    python -m standins.langfuse_server --port 0 --seed 7 --traces 2000 --spacing 1 \\
        [--version 4.16.0 | --generation v3] [--write-mode dual] [--export-delay 2] \\
        [--heavy-read-limit 500] [--overrides-json '{...}'] [--score-configs-json '[...]'] \\
        [--evaluators-json '[...]'] [--evaluation-rules-json '[...]'] \\
        [--latency 0.02] [--rate-429 0.3 --retry-after 1] [--scenario-json '{...}']

It prints one JSON line ``{"port": …, "pid": …, "url": …}`` when it listens, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from heapq import heappop, heappush, merge
from typing import Any

from standins import langfuse_query as q
from standins.base import Routed, StandinApp
from standins.contract import Contract, ContractViolation, get_contract
from standins.faults import FaultConfig, format_retry_after
from standins.formats import PROJECT_ID, encode_io
from standins.generate import EPOCH, Corpus, RenderedTrace, RowRecord, Scenario, TraceHeader, micros
from standins.http import Request, Response
from standins.langfuse_evaluators import EvaluatorStore
from standins.langfuse_evaluators import page as evaluator_page
from standins.langfuse_profile import (
    DEFAULT_VERSION,
    VERSIONS,
    WRITE_MODES,
    ServerProfile,
    generation_of,
    profile_for,
    version_tuple,
)
from standins.score_store import ScoreStore

PUBLIC_KEY = "pk-lf-standin"
SECRET_KEY = "sk-lf-standin"
#: ``POST /api/public/scores`` runs behind Next.js's 1 MB body limit; ingestion takes 4.5 MB.
SCORES_BODY_LIMIT = 1_000_000
INGESTION_BODY_LIMIT = 4_500_000
METADATA_TRUNCATE = 200
#: Rows of one list answer checked in "sample" mode.
SAMPLE_ROWS = 20
#: Config names: ``^[\p{L}\p{N}_ .()-]+$``, 1–35 characters (``\w`` is Unicode letters, digits and ``_``).
SCORE_NAME = re.compile(r"^[\w .()\-]{1,35}\Z")
ENVIRONMENT = re.compile(r"^(?!langfuse)[a-z0-9_-]+$")

EVALUATORS = ("GET", "/api/public/unstable/evaluators")
EVALUATION_RULES = ("GET", "/api/public/unstable/evaluation-rules")
V4_ONLY = {
    ("GET", "/api/public/v2/observations"),
    ("GET", "/api/public/experiments"),
    ("GET", "/api/public/experiment-items"),
}
V3_ONLY = {
    ("GET", "/api/public/traces"),
    ("GET", "/api/public/observations"),
    ("GET", "/api/public/traces/{traceId}"),
    ("GET", "/api/public/sessions"),
    ("GET", "/api/public/sessions/{sessionId}"),
    ("GET", "/api/public/datasets/{datasetName}/runs"),
    ("GET", "/api/public/dataset-run-items"),
    ("GET", "/api/public/datasets/{datasetName}/runs/{runName}"),
}
OTLP = ("POST", "/api/public/otel/v1/traces")
LEGACY_OBSERVATIONS = ("GET", "/api/public/observations")
#: ``GET /observations`` (v1): ``publicApiPaginationZod`` caps ``limit`` at 100, as on every legacy list.
LEGACY_MAX_LIMIT = 100
V3_SCORES = ("GET", "/api/public/v3/scores")
#: Annotation queues' items (read, add): with the v3 scores read (not 2.x, whose public API has no queues).
QUEUE_ITEMS = (
    ("GET", "/api/public/annotation-queues/{queueId}/items"),
    ("POST", "/api/public/annotation-queues/{queueId}/items"),
)
#: ``GET /v3/scores`` field groups; another name is refused (400).
SCORE_FIELD_GROUPS = frozenset({"details", "subject", "annotation"})
HEAVY_READ_MESSAGE = "Query exceeded resource limits. Narrow the time range or reduce the page size."
EVENTS_ONLY_MESSAGE = (
    "This endpoint is not available on deployments running in Langfuse v4 events_only mode. "
    "Use the v2 observations and experiments APIs, or switch the write mode to dual."
)
HTML_404 = (
    '<!DOCTYPE html><html><head><meta charSet="utf-8"/><meta name="viewport" content="width=device-width"/>'
    '<title>404: This page could not be found</title></head><body><div style="font-family:system-ui">'
    '<div><h1 class="next-error-h1">404</h1><div><h2>This page could not be found.</h2></div></div></div>'
    "</body></html>"
)


def html_404() -> Response:
    """Next.js's default 404: a route the server does not have (no ``/api`` catch-all)."""
    return Response(404, HTML_404.encode(), content_type="text/html; charset=utf-8")


#: Request size limits in front of the API: name → (what is measured, bytes, status when over). Node's HTTP
#: server (Langfuse's web container, ``--max-http-header-size``, 16 KiB by default) counts the request line
#: and the headers together and answers 431; nginx's ``large_client_header_buffers`` (4 × 8k by default)
#: refuses a request line longer than one buffer with 414.
URL_LIMITS: dict[str, tuple[str, int, int] | None] = {
    "node": ("head", 16 * 1024, 431),
    "nginx": ("line", 8 * 1024, 414),
    "none": None,
}


def too_long(request: Request, limit: str) -> Response | None:
    """The answer of a server (or its proxy) refusing ``request`` as too long, or None."""
    rule = URL_LIMITS[limit]
    if rule is None:
        return None
    measured, most, status = rule
    size = len(f"{request.method} {request.target} HTTP/1.1\r\n".encode())
    if measured == "head":
        size += sum(len(f"{name}: {value}\r\n".encode()) for name, value in request.headers.items())
    if size <= most:
        return None
    if status == 414:
        title = "414 Request-URI Too Large"
        html = f"<html><head><title>{title}</title></head><body><center><h1>{title}</h1></center></body></html>"
        return Response(414, html.encode(), content_type="text/html")
    return Response(431, b"")


@dataclass
class LangfuseOptions:
    """Everything that shapes one stand-in; the same fields are the CLI flags of the process.

    ``version`` picks the behaviour (:func:`standins.langfuse_profile.profile_for`); ``generation`` alone
    picks a default version ("v4" → 4.16.0, "v3" → 3.120.0), ``version`` alone implies the generation.
    ``overrides`` changes single :class:`ServerProfile` flags.
    """

    generation: str | None = None
    version: str | None = None
    public_key: str = PUBLIC_KEY
    secret_key: str = SECRET_KEY
    #: More (public, secret) key pairs of the project (a project may have several API keys).
    more_keys: tuple[tuple[str, str], ...] = ()
    scenario: Scenario = field(default_factory=Scenario)
    faults: FaultConfig = field(default_factory=FaultConfig)
    #: Fault: the observation cursor carries only the last row's start time (as a timestamp cursor
    #: would), so each next page repeats the previous page's last rows — duplicates across a page
    #: boundary, still in startTime order.
    repeat_boundary_rows: bool = False
    #: Answers checked against the contract: "all"; "sample" (lists: at most ``SAMPLE_ROWS`` rows of each
    #: answer, spread over it — the package's models take ~0.4 ms a row, too slow for 100,000-trace
    #: benchmarks); "none". Requests are always checked in full.
    validate_answers: str = "all"
    #: Keep score comments and metadata (turn off for very large runs).
    keep_score_details: bool = True
    #: What time it is for row visibility (default: the wall clock). In-process tests that step time
    #: through hours of live traffic pass their own clock.
    clock: Callable[[], datetime] | None = None
    #: Traces rendered and kept (LRU).
    cache_size: int = 4096
    #: ``GET /observations`` drops ``toStartTime`` (zod strips a key it does not know), as 2.x releases
    #: from before that parameter did (they had ``fromStartTime`` only). Thread mode only.
    observations_without_to_start_time: bool = False
    #: v4 write mode: "events_only" (legacy reads 404) or "dual" (legacy reads served as on v3).
    write_mode: str = "events_only"
    #: v4 (span-end visibility): seconds from a span's end until its row is visible; None: the
    #: scenario's ``ingest_lag``.
    export_delay: float | None = None
    #: 422 "Query exceeded resource limits" on ``/v2/observations`` with ``io`` when ``limit`` is above
    #: this (None: off), or when the answer's rows carry more than ``heavy_read_bytes`` (None: off).
    heavy_read_limit: int | None = None
    heavy_read_bytes: int | None = None
    #: Profile flags changed from the version's (``ServerProfile`` field → value).
    overrides: dict[str, Any] = field(default_factory=dict)
    #: Score configs present at start: dicts as ``POST /score-configs`` takes them, plus optional
    #: ``id`` and ``createdAt``.
    score_configs: tuple[dict[str, Any], ...] = ()
    #: Project evaluators present at start (standins/langfuse_evaluators.py ``add_evaluator``: the same
    #: name twice is two versions), beside the 22 managed ones.
    evaluators: tuple[dict[str, Any], ...] = ()
    #: Evaluation rules present at start, v4 or legacy shape (``add_rule``).
    evaluation_rules: tuple[dict[str, Any], ...] = ()
    #: How long a request may be (:data:`URL_LIMITS`): "node" (the server itself, Node's default: request
    #: line and headers within 16 KiB, else 431), "nginx" (a proxy in front with nginx's default buffers:
    #: a request line within 8 KiB, else 414), "none".
    url_limit: str = "node"

    def __post_init__(self) -> None:
        if self.generation is not None and self.generation not in DEFAULT_VERSION:
            raise ValueError(f"generation must be one of {sorted(DEFAULT_VERSION)}")
        if self.version is None:
            self.generation = self.generation or "v4"
            self.version = DEFAULT_VERSION[self.generation]
        elif self.generation is None:
            self.generation = generation_of(self.version)
        elif generation_of(self.version) != self.generation:
            raise ValueError(f"version {self.version} is not a {self.generation} server")
        if self.validate_answers not in ("all", "sample", "none"):
            raise ValueError("validate_answers is all, sample or none")
        if self.write_mode not in WRITE_MODES:
            raise ValueError(f"write_mode is one of {WRITE_MODES}")
        if self.url_limit not in URL_LIMITS:
            raise ValueError(f"url_limit is one of {sorted(URL_LIMITS)}")
        self.profile  # noqa: B018 - unknown override flags fail here

    @property
    def profile(self) -> ServerProfile:
        assert self.version is not None
        return profile_for(self.version, self.write_mode).replace(**self.overrides)


# --- helpers ------------------------------------------------------------------------------------------


def _parse_io(value: Any) -> Any:
    """v4 returns input/output as raw strings; v3 returns the JSON value (a string that is not JSON stays)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


def _truncate_metadata(row: dict[str, Any], expand: set[str]) -> dict[str, Any]:
    metadata = row.get("metadata")
    if not isinstance(metadata, dict) or not any(
        isinstance(v, str) and len(v) > METADATA_TRUNCATE for v in metadata.values()
    ):
        return row
    cut = {
        k: (v[:METADATA_TRUNCATE] if isinstance(v, str) and len(v) > METADATA_TRUNCATE and k not in expand else v)
        for k, v in metadata.items()
    }
    return {**row, "metadata": cut}


def _encode_key(key: tuple[int, str, int]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode()


def _decode_key(cursor: str) -> tuple[int, str, int]:
    start, ident, variant = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    return int(start), str(ident), int(variant)


def _v3_observation(row: dict[str, Any]) -> dict[str, Any]:
    """A v4 row as the v3 ``ObservationsView`` (input/output as JSON values), with what Langfuse's
    ``APIObservation`` adds to the documented fields: ``projectId``, ``createdAt``, ``updatedAt`` (which of two
    unmerged rows is newer) and the token counts kept for backwards compatibility."""
    usage = row.get("usageDetails") or {}
    cost = row.get("costDetails") or {}
    return {
        "id": row["id"],
        "projectId": row.get("projectId") or PROJECT_ID,
        "createdAt": row.get("createdAt") or row["startTime"],
        "updatedAt": row.get("updatedAt") or row["startTime"],
        "traceId": row["traceId"],
        "type": row["type"],
        "name": row.get("name"),
        "startTime": row["startTime"],
        "endTime": row.get("endTime"),
        "completionStartTime": row.get("completionStartTime"),
        "model": row.get("model"),
        "modelParameters": row.get("modelParameters"),
        "input": _parse_io(row.get("input")),
        "version": row.get("version"),
        "metadata": row.get("metadata"),
        "output": _parse_io(row.get("output")),
        "usage": {
            "input": usage.get("input", 0),
            "output": usage.get("output", 0),
            "total": usage.get("total", 0),
            "unit": "TOKENS" if usage else None,
        },
        "level": row.get("level") or "DEFAULT",
        "statusMessage": row.get("statusMessage"),
        "parentObservationId": row.get("parentObservationId"),
        "promptId": None,
        "usageDetails": usage,
        "costDetails": row.get("costDetails") or {},
        "environment": row.get("environment"),
        "promptName": None,
        "promptVersion": None,
        "modelId": None,
        "inputPrice": None,
        "outputPrice": None,
        "totalPrice": None,
        # Langfuse prices a generation of a known model (the rows' costDetails); null otherwise.
        "calculatedInputCost": cost.get("input"),
        "calculatedOutputCost": cost.get("output"),
        "calculatedTotalCost": cost.get("total"),
        "latency": row.get("latency"),
        "timeToFirstToken": row.get("timeToFirstToken"),
        "promptTokens": usage.get("input", 0),
        "completionTokens": usage.get("output", 0),
        "totalTokens": usage.get("total", 0),
        "unit": "TOKENS" if usage else None,
    }


def _v2_observation(row: dict[str, Any]) -> dict[str, Any]:
    """A v4 row as Langfuse 2.x's ``observations_view`` row (PostgreSQL): no ``environment``, no
    ``usageDetails``/``costDetails`` (token counts only as ``promptTokens``/``completionTokens``/…)."""
    shown = _v3_observation(row)
    for key in ("environment", "usageDetails", "costDetails"):
        del shown[key]
    return shown


def _tie_order(page: int, observation_id: str) -> bytes:
    """Where a row falls among rows of the same ``startTime``: Langfuse orders by ``start_time DESC`` only,
    so ties come in whatever order the database reads them — a different one for each page's query."""
    return hashlib.sha256(f"{page}:{observation_id}".encode()).digest()


class _Reply(Exception):
    """Raised by a handler to answer at once (errors)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None, *, error: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}
        #: Langfuse's ``error`` field (a class name, or zod's issues), when it sends one.
        self.error = error

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": str(self)}
        if self.error is not None:
            out["error"] = self.error
        return out


def _zod_type_error(expected: str, received: str) -> _Reply:
    """``withMiddlewares``' answer to a body zod refuses at its top level."""
    issue = {
        "code": "invalid_type",
        "expected": expected,
        "received": received,
        "path": [],
        "message": f"Expected {expected}, received {received}",
    }
    return _Reply(400, "Invalid request data", error=[issue])


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _int(params: q.Params, name: str, default: int, maximum: int | None = None, minimum: int = 1) -> int:
    text = q.one(params, name)
    value = default if text is None else int(text)
    if value < minimum:
        raise _Reply(400, f"{name} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise _Reply(400, f"{name} must be at most {maximum}")
    return value


# --- the app ------------------------------------------------------------------------------------------


Handler = Callable[[Request, dict[str, str]], tuple[int, Any]]


class LangfuseApp(StandinApp):
    name = "langfuse"

    def __init__(self, options: LangfuseOptions | None = None, *, contract: Contract | None = None) -> None:
        self.options = options or LangfuseOptions()
        super().__init__(self.options.faults)
        self.contract = contract or get_contract()
        self.profile: ServerProfile = self.options.profile
        self.corpus = Corpus(
            self.options.scenario,
            cache_size=self.options.cache_size,
            span_end_visibility=self.profile.span_end_visibility,
            export_delay=self.options.export_delay,
        )
        self.store = ScoreStore(keep_details=self.options.keep_score_details)
        self.configs: list[dict[str, Any]] = []
        self._config_serial = 0
        #: Scores accepted but dropped by the later config check (``async_validation``).
        self.dropped_scores: list[dict[str, Any]] = []
        self.reject_names: dict[str, str] = {}
        #: In-process tests: a score the server refuses by a rule of the test's — (status, message), or
        #: None to go on (``POST /scores`` lists and ``/ingestion`` answer 207 with it, one object the status).
        self.reject_score: Callable[[Mapping[str, Any]], tuple[int, str] | None] | None = None
        #: Annotation queues by id: their name and items (``add_queue``; items added by ``POST …/items``).
        self.queues: dict[str, dict[str, Any]] = {}
        self.rows_served = 0
        self.bytes_served = 0
        self.score_posts = 0
        self.otel_spans = 0
        self.otel_requests = 0
        self.otel_summaries: list[dict[str, Any]] = []
        self.ingestion_events: set[str] = set()
        keys = [(self.options.public_key, self.options.secret_key), *self.options.more_keys]
        self._auth = {"Basic " + base64.b64encode(f"{public}:{secret}".encode()).decode() for public, secret in keys}
        self._handlers: dict[tuple[str, str], Handler] = {
            ("GET", "/api/public/health"): self._health,
            ("GET", "/api/public/projects"): self._projects,
            ("GET", "/api/public/score-configs"): self._list_configs,
            ("POST", "/api/public/score-configs"): self._create_config,
            ("GET", "/api/public/score-configs/{configId}"): self._get_config,
            ("GET", "/api/public/v2/datasets"): self._datasets,
            ("GET", "/api/public/v2/datasets/{datasetName}"): self._dataset,
            ("GET", "/api/public/dataset-items/{id}"): self._dataset_item,
            ("GET", "/api/public/v2/observations"): self._observations,
            ("GET", "/api/public/experiments"): self._experiments,
            ("GET", "/api/public/experiment-items"): self._experiment_items,
            ("POST", "/api/public/scores"): self._post_scores,
            ("GET", "/api/public/v3/scores"): self._get_scores,
            QUEUE_ITEMS[0]: self._queue_items,
            QUEUE_ITEMS[1]: self._add_queue_item,
            ("POST", "/api/public/ingestion"): self._ingestion,
            ("GET", "/api/public/traces"): self._traces,
            ("GET", "/api/public/traces/{traceId}"): self._trace,
            ("GET", "/api/public/sessions"): self._sessions,
            ("GET", "/api/public/sessions/{sessionId}"): self._session,
            LEGACY_OBSERVATIONS: self._legacy_observations,
            ("GET", "/api/public/datasets/{datasetName}/runs"): self._runs,
            ("GET", "/api/public/dataset-run-items"): self._run_items,
            ("GET", "/api/public/datasets/{datasetName}/runs/{runName}"): self._run,
            EVALUATORS: self._evaluators,
            EVALUATION_RULES: self._evaluation_rules,
        }
        for config in self.options.score_configs:
            self.add_config(config)
        self.evaluator_store = EvaluatorStore()
        for evaluator in self.options.evaluators:
            self.evaluator_store.add_evaluator(evaluator)
        for rule in self.options.evaluation_rules:
            self.evaluator_store.add_rule(rule)

    def clock_now(self) -> datetime:
        """The time rows become visible by (:attr:`LangfuseOptions.clock`, else the wall clock)."""
        return self.options.clock() if self.options.clock is not None else datetime.now(UTC)

    @property
    def generation(self) -> str:
        return self.profile.generation

    # --- routing and the contract ------------------------------------------------------------

    def route(self, request: Request) -> Routed:
        try:
            operation = self.contract.operation(request.method, request.raw_path)
        except ContractViolation as error:
            self.violation(str(error))
            label = f"{request.method} {request.raw_path}"
            return Routed(label, answer=html_404())
        key = (operation.method, operation.path)
        label = f"{operation.method} {operation.path}"
        if (refused := too_long(request, self.options.url_limit)) is not None:
            return Routed(label, answer=refused)
        profile = self.profile
        # Before authentication: routes this version does not have (Next.js's HTML 404), and the legacy
        # reads a v4 events_only deployment rejects.
        if key in V4_ONLY and profile.v4_routes == "html404":
            return Routed(label, answer=html_404())
        if key in V4_ONLY and key != ("GET", "/api/public/v2/observations") and profile.v4_routes != "serve":
            return Routed(label, answer=html_404())
        if (key == OTLP and not profile.otlp) or (key in (V3_SCORES, *QUEUE_ITEMS) and not profile.v3_scores):
            return Routed(label, answer=html_404())
        if key in (EVALUATORS, EVALUATION_RULES) and not profile.evaluators_api:
            return Routed(label, answer=html_404())
        if key in V3_ONLY and profile.legacy_reads == "events_only_404":
            return Routed(label, answer=self.error_response(404, EVENTS_ONLY_MESSAGE))
        if key != OTLP and key not in self._handlers:
            self.note_unsupported(f"{label}: the stand-in does not serve this operation")
            return Routed(label, answer=html_404())
        if request.header("authorization") not in self._auth:
            return Routed(
                label,
                answer=self.error_response(
                    401, "Invalid credentials. Confirm that you've configured the correct host."
                ),
            )
        url = "http://127.0.0.1" + request.target
        body: Any
        try:
            if key == OTLP:
                body = self._otlp_body(request)
            else:
                try:
                    body = json.loads(request.body) if request.body else None
                except ValueError as error:
                    raise ContractViolation(f"{label}: the body is not JSON: {error}") from None
            self.contract.check_request(request.method, url, body, scores_body="any")
        except ContractViolation as error:
            self.violation(f"request: {error}")
            return Routed(label, answer=self.error_response(400, f"contract violation: {error}"))
        if key == ("GET", "/api/public/v2/observations") and profile.v4_routes == "501":
            payload = {
                "message": "v2 observations API is not available: set LANGFUSE_ENABLE_EVENTS_TABLE_V2_APIS=true",
                "error": "NotImplementedError",
            }
            return Routed(label, answer=Response.json(501, payload))
        if key == ("GET", "/api/public/dataset-run-items") and not profile.run_items_route:
            payload = {"message": "Method not allowed", "error": "MethodNotAllowedError"}
            return Routed(label, answer=Response.json(405, payload))
        return Routed(label, operation.path, dict(operation.path_params))

    def _otlp_body(self, request: Request) -> dict[str, Any]:
        """The OTLP export as OTLP/JSON (protobuf decoded), so the contract can check it."""
        content_type = request.header("content-type").split(";")[0].strip()
        if content_type == "application/x-protobuf":
            from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
            from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

            message = ExportTraceServiceRequest()
            try:
                message.ParseFromString(request.body)
            except DecodeError as error:
                raise ContractViolation(f"OTLP: the body is not an ExportTraceServiceRequest: {error}") from None
            # OTLP/JSON writes enums as integers and ids as hex (protobuf's JSON mapping: names, base64).
            body = dict(MessageToDict(message, use_integers_for_enums=True))
            for resource in body.get("resourceSpans") or []:
                for scope in resource.get("scopeSpans") or []:
                    for span in scope.get("spans") or []:
                        for key in ("traceId", "spanId", "parentSpanId"):
                            if span.get(key):
                                span[key] = base64.b64decode(span[key]).hex()
            return body
        if content_type == "application/json":
            try:
                body = json.loads(request.body)
            except ValueError as error:
                raise ContractViolation(f"OTLP: the body is not JSON: {error}") from None
            if not isinstance(body, dict):
                raise ContractViolation("OTLP: the body is not an object")
            return body
        raise ContractViolation(f"OTLP: unsupported content type {content_type!r}")

    async def serve(self, request: Request, routed: Routed) -> Response:
        key = (request.method, routed.template)
        if key == OTLP:
            return self._otlp(request)
        handler = self._handlers[key]
        try:
            status, payload = handler(request, routed.params or {})
            headers: dict[str, str] = {}
        except _Reply as reply:
            status, payload, headers = reply.status, reply.payload(), reply.headers
        except q.UnsupportedQuery as error:
            self.note_unsupported(f"{routed.label}: {error}")
            status, payload, headers = 400, {"message": f"unsupported by the stand-in: {error}"}, {}
        response = self.checked_answer(request.method, routed.template, status, payload, headers)
        self.bytes_served += len(response.body)
        return response

    def checked_answer(
        self, method: str, template: str, status: int, payload: Any, headers: dict[str, str] | None = None
    ) -> Response:
        """The answer, checked against the contract (unless this version's answers are not, or checking is
        off): a violation is recorded and answered 400 with the reason."""
        if self.options.validate_answers != "none" and (method, template) not in self._unchecked():
            try:
                self.contract.check_response(
                    method, template, status, self._to_check(payload), scores_body=self.profile.scores_body
                )
            except ContractViolation as error:
                self.violation(f"answer: {error}")
                return self.error_response(400, f"stand-in answer violates the contract: {error}")
        # Langfuse's Node server dates every answer with its own clock (the worker bounds its windows by it).
        dated = {"Date": format_datetime(self.clock_now().astimezone(UTC), usegmt=True), **(headers or {})}
        return Response.json(status, payload, dated)

    def _unchecked(self) -> set[tuple[str, str]]:
        """Answers this version sends that the package's models refuse (2.x): measured, not checked."""
        out = set()
        if not self.profile.project_organization:
            out.add(("GET", "/api/public/projects"))
        if not self.profile.dataset_item_media:
            out.add(("GET", "/api/public/dataset-items/{id}"))
        if self._v2_rows:  # 2.x observation rows lack usageDetails, costDetails, environment
            out.update({LEGACY_OBSERVATIONS, ("GET", "/api/public/traces/{traceId}")})
        return out

    @property
    def _v2_rows(self) -> bool:
        """Observations come from 2.x's PostgreSQL ``observations_view`` (:func:`_v2_observation`)."""
        return version_tuple(self.profile.version)[0] < 3

    def _to_check(self, payload: Any) -> Any:
        """The payload, or in "sample" mode a list answer cut to ``SAMPLE_ROWS`` rows spread over it."""
        if self.options.validate_answers != "sample" or not isinstance(payload, dict):
            return payload
        data = payload.get("data")
        if not isinstance(data, list) or len(data) <= SAMPLE_ROWS:
            return payload
        step = len(data) / SAMPLE_ROWS
        return {**payload, "data": [data[int(i * step)] for i in range(SAMPLE_ROWS)]}

    def rate_limited(self, retry_after: float) -> Response:
        """Langfuse's 429 (``RateLimitService``): ``Retry-After`` plus the ``X-RateLimit-*`` headers, the
        reset as JS ``Date.toString()``, and ``details`` in the body."""
        reset = datetime.now(UTC) + timedelta(seconds=retry_after)
        reset_text = reset.strftime("%a %b %d %Y %H:%M:%S GMT+0000 (Coordinated Universal Time)")
        headers = {
            "Retry-After": format_retry_after(retry_after),
            "X-RateLimit-Limit": "30",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": reset_text,
        }
        payload = {
            "message": "Rate limit exceeded",
            "code": "rate_limited",
            "details": {
                "retryAfterSeconds": retry_after,
                "limit": 30,
                "remaining": 0,
                "resetAt": q.iso(reset),
            },
        }
        return Response.json(429, payload, headers)

    # --- start-up ----------------------------------------------------------------------------

    def _health(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        return 200, {"version": self.options.version, "status": "OK"}

    def _projects(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        project = {
            "id": PROJECT_ID,
            "name": "standin",
            "organization": {"id": "org-standin", "name": "standin"},
            "metadata": {},
        }
        if not self.profile.project_organization:
            del project["organization"], project["metadata"]
        return 200, {"data": [project]}

    def _list_configs(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 100)
        # listScoreConfigs: createdAt desc, id asc (newest first).
        ordered = sorted(self.configs, key=lambda c: c["id"])
        ordered.sort(key=lambda c: c["createdAt"], reverse=True)
        chunk = ordered[(page - 1) * limit : page * limit]
        return 200, {"data": chunk, "meta": q.page_meta(page, limit, len(self.configs))}

    def _evaluators(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 100)
        return 200, evaluator_page(self.evaluator_store.listed(), page, limit)

    def _evaluation_rules(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 100)
        return 200, evaluator_page(self.evaluator_store.rules, page, limit)

    def _get_config(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        config = next((c for c in self.configs if c["id"] == params["configId"]), None)
        if config is None:
            raise _Reply(404, "Score config not found")
        return 200, config

    def _create_config(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        body = request.json()
        return 200, self.add_config({k: v for k, v in body.items() if k not in ("id", "createdAt")})

    def add_config(self, body: dict[str, Any]) -> dict[str, Any]:
        """A new config (names are not unique: the same name twice is two configs). Tests may give
        ``id``, ``createdAt`` and ``isArchived``."""
        name, data_type = body["name"], body["dataType"]
        if not isinstance(name, str) or not SCORE_NAME.match(name):
            rule = "1 to 35 letters, digits, '_', ' ', '.', '(', ')', '-'"
            raise _Reply(400, f"Invalid score config name {name!r}: {rule}")
        categories = body.get("categories")
        if data_type == "BOOLEAN":
            categories = [{"value": 1, "label": "True"}, {"value": 0, "label": "False"}]
        elif data_type == "CATEGORICAL" and not categories:
            raise _Reply(400, "Categorical score configs need categories")
        minimum, maximum = body.get("minValue"), body.get("maxValue")
        if data_type == "NUMERIC" and minimum is not None and maximum is not None and minimum >= maximum:
            raise _Reply(400, "minValue must be less than maxValue")
        created = body.get("createdAt") or q.iso(self.clock_now())
        self._config_serial += 1
        config = {
            "id": body.get("id") or f"cfg-{self._config_serial}",
            "name": name,
            "createdAt": created,
            "updatedAt": created,
            "projectId": PROJECT_ID,
            "dataType": data_type,
            "isArchived": bool(body.get("isArchived", False)),
            "minValue": minimum if data_type == "NUMERIC" else None,
            "maxValue": maximum if data_type == "NUMERIC" else None,
            "categories": categories if data_type in ("BOOLEAN", "CATEGORICAL") else None,
            "description": body.get("description"),
        }
        self.configs.append(config)
        return config

    # --- datasets ----------------------------------------------------------------------------

    def _datasets(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 100)
        # datasets_list: createdAt desc (newest first), as the UI lists them
        ordered = sorted(self.corpus.datasets.values(), key=lambda d: (d.get("createdAt", ""), d["id"]), reverse=True)
        return 200, {"data": ordered[(page - 1) * limit : page * limit], "meta": q.page_meta(page, limit, len(ordered))}

    def _dataset(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        dataset = self.corpus.datasets.get(params["datasetName"])
        if dataset is None:
            raise _Reply(404, f"Dataset {params['datasetName']} not found")
        return 200, dataset

    def _dataset_item(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        item = self.corpus.dataset_items.get(params["id"])
        if item is None:
            raise _Reply(404, "Dataset item not found")
        if not self.profile.dataset_item_media:
            item = {k: v for k, v in item.items() if k != "mediaReferences"}
        return 200, item

    # --- v4 observations ---------------------------------------------------------------------

    def _observations(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        if q.one(params, "parseIoAsJson") == "true":
            raise _Reply(400, "parseIoAsJson is deprecated and no longer supported")
        limit = _int(params, "limit", 50, 1000)
        fields = q.one(params, "fields")
        q.field_keys(fields)
        conditions = q.parse_filter(params)
        simple = q.effective_simple_params(params, conditions, q.V4_SIMPLE_COLUMNS)
        low, high = q.parse_time(q.one(simple, "fromStartTime")), q.parse_time(q.one(simple, "toStartTime"))
        for c in conditions:  # narrow the scan by the filter's own bounds
            if c.get("column") == "startTime" and c.get("type") == "datetime":
                bound = q.parse_time(c.get("value"))
                if bound and c["operator"] in (">=", ">"):
                    low = bound if low is None else max(low, bound)
                if bound and c["operator"] in ("<", "<="):
                    high = bound if high is None else min(high, bound)
            if c.get("column") == "endTime" and c.get("type") == "datetime" and c["operator"] in (">=", ">"):
                # A row ending after the bound started at most a trace's duration before it.
                bound, longest = q.parse_time(c.get("value")), self.corpus.longest_run
                if bound and longest is not None:
                    earliest = bound - longest
                    low = earliest if low is None else max(low, earliest)
        trace_ids = {c["value"] for c in conditions if c.get("column") == "traceId" and c.get("operator") == "="}
        for c in conditions:
            if c.get("column") == "traceId" and c.get("operator") == "any of" and isinstance(c.get("value"), list):
                trace_ids.update(str(v) for v in c["value"])
        if "traceId" in simple:
            trace_ids.add(simple["traceId"][0])
        cursor_text = q.one(params, "cursor")
        try:
            after = _decode_key(cursor_text) if cursor_text else None
        except (ValueError, binascii.Error, TypeError) as error:
            raise _Reply(400, f"invalid cursor: {error}") from None
        roots_only = q.wants_roots_only(params, conditions)
        expand = set((q.one(params, "expandMetadata") or "").split(",")) - {""}
        groups = {"core", *(fields or q.DEFAULT_FIELDS).split(",")}
        heavy = self.options.heavy_read_limit
        if "io" in groups and heavy is not None and limit > heavy:
            raise _Reply(422, HEAVY_READ_MESSAGE, error="Request timed out")
        flat = self.profile.flatten_metadata
        # v4 filters on the stored (flattened, string) metadata.
        by_flat_metadata = flat and any(c.get("column") == "metadata" for c in conditions)
        page: list[tuple[tuple[int, str, int], dict[str, Any]]] = []
        for key, row in self._rows_desc(low, high, after, roots_only, trace_ids):
            candidate = {**row, "metadata": q.flatten_metadata(row.get("metadata"))} if by_flat_metadata else row
            if q.observation_matches(candidate, params, conditions):
                page.append((key, row))
                if len(page) > limit:
                    break
        more = len(page) > limit
        page = page[:limit]
        cursor = None
        if more:
            last = page[-1][0]
            if self.options.repeat_boundary_rows and page[0][0][0] != last[0]:
                last = (last[0], "", -1)  # before every row of that start time: they come again
            cursor = _encode_key(last)
        if flat:
            # Truncated only on the events_core path: no io and no expandMetadata (finding 13).
            cut = METADATA_TRUNCATE if "io" not in groups and not expand else None
            data = []
            for _key, row in page:
                shown: dict[str, Any] = q.project(row, fields)
                if "metadata" in shown:
                    shown["metadata"] = q.observation_metadata(shown["metadata"], truncate=cut)
                data.append(shown)
        else:
            data = [_truncate_metadata(q.project(row, fields), expand) for _, row in page]
        budget = self.options.heavy_read_bytes
        if "io" in groups and budget is not None:
            size = sum(len(r.get("input") or "") + len(r.get("output") or "") for r in data)
            if size > budget:
                raise _Reply(422, HEAVY_READ_MESSAGE, error="Request timed out")
        self.rows_served += len(data)
        return 200, {"data": data, "meta": {"cursor": cursor} if cursor else {}}

    def _headers_desc(self, low: datetime | None, high: datetime | None) -> Iterator[TraceHeader]:
        """Every trace starting in ``[low, high]``, newest first, across the corpus's sources."""

        def one_source(source: Any) -> Iterator[TraceHeader]:
            indices = source.indices_starting(low, high)
            for i in reversed(indices):
                start = source.start_of(i)
                if (low is None or start >= low) and (high is None or start <= high):
                    yield source.header(i)

        streams = [one_source(s) for s in self.corpus.sources if len(s)]
        return merge(*streams, key=lambda h: h.start, reverse=True)

    def _rows_desc(
        self,
        low: datetime | None,
        high: datetime | None,
        after: tuple[int, str, int] | None,
        roots_only: bool,
        trace_ids: set[str],
    ) -> Iterator[tuple[tuple[int, str, int], dict[str, Any]]]:
        """Visible rows ordered as Langfuse pages them (startTime descending), after the cursor key.

        Traces are rendered newest first; a row is handed out once no trace not rendered yet can hold a
        row that sorts before it (a trace's rows start within ``MAX_TRACE`` of its start).
        """
        now = self.clock_now()
        reach = self.corpus.root_reach if roots_only else self.corpus.max_duration
        upper = high
        if after is not None:
            cursor_time = EPOCH + timedelta(microseconds=-after[0])
            upper = cursor_time if upper is None else min(upper, cursor_time)
        if trace_ids:
            headers: Iterator[TraceHeader] = iter(
                sorted(
                    (h for h in (self.corpus.find(t) for t in trace_ids) if h is not None),
                    key=lambda h: h.start,
                    reverse=True,
                )
            )
        else:
            headers = self._headers_desc(None if low is None else low - reach, upper)
        # Rows made as they are served (a trace of 100,000 observations) come from an iterator each: one
        # of its rows is in the heap at a time, the next pushed when it is handed out.
        Lazy = Iterator[tuple[tuple[int, str, int], dict[str, Any]]]
        heap: list[tuple[tuple[int, str, int], dict[str, Any], Lazy | None]] = []

        def push_next(rows: Lazy) -> None:
            for key, row in rows:
                if after is None or key > after:
                    heappush(heap, (key, row, rows))
                    return

        def pop() -> tuple[tuple[int, str, int], dict[str, Any]]:
            key, row, rows = heappop(heap)
            if rows is not None:
                push_next(rows)
            return key, row

        reach_us = int(reach / timedelta(microseconds=1))
        for header in headers:
            threshold = -(micros(header.start) + reach_us)
            while heap and heap[0][0][0] < threshold:
                key, row = pop()
                if after is None or key > after:
                    yield key, row
            records: list[RowRecord] = (
                self.corpus.root_records(header) if roots_only else self.corpus.render(header).records
            )
            for record in records:
                for variant, row in enumerate(record.visible_rows(now)):
                    heappush(heap, ((-record.start_us, row["id"], variant), row, None))
            if not roots_only:
                push_next(self.corpus.lazy_rows(header, now, None if after is None else -after[0]))
        while heap:
            key, row = pop()
            if after is None or key > after:
                yield key, row

    # --- v4 experiments ----------------------------------------------------------------------

    def _visible_items(self) -> list[dict[str, Any]]:
        return self.corpus.visible_experiment_items(self.clock_now())

    def _experiments(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        limit = _int(params, "limit", 50, 100)
        rows = q.experiments_in_window(self.corpus.experiments, self._visible_items(), params)
        offset = q.decode_offset_cursor(q.one(params, "cursor"))
        cursor = q.encode_offset_cursor(offset + limit) if offset + limit < len(rows) else None
        fields = q.one(params, "fields")
        page = [q.project_experiment(e, fields) for e in rows[offset : offset + limit]]
        if self.profile.flatten_metadata:
            for experiment in page:
                if "metadata" in experiment:
                    experiment["metadata"] = q.flatten_metadata(experiment["metadata"])
        return 200, {"data": page, "meta": {"cursor": cursor}}

    def _experiment_items(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        limit = _int(params, "limit", 50, 100)
        rows = q.experiment_items_matching(self._visible_items(), params)
        offset = q.decode_offset_cursor(q.one(params, "cursor"))
        cursor = q.encode_offset_cursor(offset + limit) if offset + limit < len(rows) else None
        fields = q.one(params, "fields")
        page = [q.project_experiment_item(self._served_item(r), fields) for r in rows[offset : offset + limit]]
        return 200, {"data": page, "meta": {"cursor": cursor}}

    def _served_item(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """An experiment item row as this version answers it: v4 sends ``input``/``output`` and
        ``expectedOutput`` as the raw stored strings (``""`` when the runner sent no expected output)
        and metadata flattened with string leaves."""
        out = dict(row)
        if self.profile.experiment_io_raw:
            out["input"] = encode_io(row.get("input"), raw_strings=True)
            out["output"] = encode_io(row.get("output"), raw_strings=True)
            out["expectedOutput"] = encode_io(row.get("expectedOutput"), raw_strings=True) or ""
        if self.profile.flatten_metadata:
            for key in ("metadata", "experimentItemMetadata", "experimentMetadata"):
                if isinstance(out.get(key), dict):
                    out[key] = q.flatten_metadata(out[key])
        return out

    # --- scores ------------------------------------------------------------------------------

    def _check_score(self, score: dict[str, Any]) -> tuple[int, str] | None:
        """Langfuse's checks of one score at the request (schema, and the config unless
        ``async_validation``), then a test's :attr:`reject_score`: the refusal (status, message), or None."""
        message = self._schema_check(score)
        if message is None and not self.profile.async_validation:
            message = self._config_check(score)
        if message is not None:
            return 400, message
        return self.reject_score(score) if self.reject_score is not None else None

    def _schema_check(self, score: dict[str, Any]) -> str | None:
        name = score.get("name")
        if name in self.reject_names:
            return self.reject_names[name]
        if not self.profile.dataset_run_scores and not score.get("traceId"):
            return "Invalid request data: traceId: Required"
        subjects = [k for k in ("traceId", "sessionId", "datasetRunId") if score.get(k)]
        if len(subjects) != 1:
            return f"Score {score.get('id')}: exactly one of traceId, sessionId, datasetRunId is required"
        if score.get("observationId") and not score.get("traceId"):
            return f"Score {score.get('id')}: observationId requires traceId"
        if score.get("source") == "EVAL":
            return f"Score {score.get('id')}: source EVAL cannot be set through the API"
        environment = score.get("environment")
        if environment is not None and not ENVIRONMENT.match(environment):
            return f"Score {score.get('id')}: invalid environment {environment!r}"
        return None

    def _config_check(self, score: dict[str, Any]) -> str | None:
        """The checks ``validateAndInflateScore`` makes (config, data type, range, category)."""
        name = score.get("name")
        value, data_type = score.get("value"), score.get("dataType")
        config_id = score.get("configId")
        config = None
        if config_id is not None:
            config = next((c for c in self.configs if c["id"] == config_id), None)
            if config is None:
                return f"Score {score.get('id')}: score config {config_id} not found"
            if config["name"] != name and not self.profile.async_validation:
                return f"Score {score.get('id')}: name {name!r} does not match the config's name {config['name']!r}"
            if data_type is not None and data_type != config["dataType"]:
                return (
                    f"Score {score.get('id')}: data type {data_type} does not match the config's {config['dataType']}"
                )
            data_type = data_type or config["dataType"]
        if data_type is None:
            data_type = "NUMERIC" if isinstance(value, int | float) else "CATEGORICAL"
        if data_type in ("NUMERIC", "BOOLEAN") and not isinstance(value, int | float):
            return f"Score {score.get('id')}: {data_type} scores need a numeric value"
        if data_type == "BOOLEAN" and value not in (0, 1):
            return f"Score {score.get('id')}: BOOLEAN scores take 0 or 1, got {value}"
        if data_type in ("CATEGORICAL", "TEXT") and not isinstance(value, str):
            return f"Score {score.get('id')}: {data_type} scores need a string value"
        if data_type == "TEXT" and not 1 <= len(str(value)) <= 500:
            return f"Score {score.get('id')}: TEXT scores are 1 to 500 characters"
        if config is not None and data_type == "NUMERIC":
            low, high = config.get("minValue"), config.get("maxValue")
            if self.profile.exclusive_ranges:
                outside = (low is not None and value <= low) or (high is not None and value >= high)
            else:
                outside = (low is not None and value < low) or (high is not None and value > high)
            if outside:
                bounds = f"({low}, {high})" if self.profile.exclusive_ranges else f"[{low}, {high}]"
                return f"Score {score.get('id')}: value {value} is outside the config's range {bounds}"
        if (
            config is not None
            and data_type == "CATEGORICAL"
            and value not in {c["label"] for c in config.get("categories") or []}
        ):
            return f"Score {score.get('id')}: value {value!r} is not a category of the config"
        return None

    def _store(self, score: dict[str, Any], timestamp: str | None, via: str) -> None:
        """An accepted score as the worker stores it: later config checks (``async_validation``: invalid
        scores dropped silently, a config's name wins), 2.x dropping metadata and timestamp, the merge."""
        if self.profile.async_validation:
            message = self._config_check(score)
            if message is not None:
                self.dropped_scores.append({"score": score, "message": message})
                return
            config = next((c for c in self.configs if c["id"] == score.get("configId")), None)
            if config is not None:
                score = {**score, "name": config["name"]}
        if not self.profile.score_details:
            score = {k: v for k, v in score.items() if k not in ("metadata", "timestamp")}
            timestamp = None
        self.store.upsert(score, timestamp, via)

    def _post_scores(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        if len(request.body) > SCORES_BODY_LIMIT:
            raise _Reply(413, "Body exceeded 1mb limit")
        body = request.json()
        self.score_posts += 1
        if self.profile.scores_body == "single":
            # PostScoresBody: one object; zod strips ``timestamp`` (the score's time is the request's).
            if not isinstance(body, dict):
                raise _zod_type_error("object", _json_kind(body))
            score = {k: v for k, v in body.items() if k != "timestamp"}
            if not score.get("id"):
                score["id"] = str(uuid.uuid4())
            refused = self._check_score(score)
            if refused:
                raise _Reply(*refused)
            self._store(score, None, "scores")
            return 200, {"id": score["id"]}
        if not isinstance(body, list):
            raise _zod_type_error("array", _json_kind(body))
        messages = []
        for score in body:
            refused = self._check_score(score)
            if refused:
                messages.append(refused[1])
            else:
                self._store(score, score.get("timestamp"), "scores")
        if messages:
            return 207, {
                "accepted": len(body) - len(messages),
                "rejected": len(messages),
                "errors": [{"message": m} for m in messages],
            }
        return 202, {"message": "Accepted"}

    def _ingestion(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        if len(request.body) > INGESTION_BODY_LIMIT:
            raise _Reply(413, "Body exceeded 4.5mb limit")
        batch = request.json()["batch"]
        successes, errors = [], []
        events_only = self.generation == "v4" and self.options.write_mode == "events_only"
        for event in batch:
            event_id = event["id"]
            if event["type"] != "score-create":
                if events_only:
                    errors.append(
                        {
                            "id": event_id,
                            "status": 400,
                            "message": f"{event['type']} events are not accepted in Langfuse v4 events_only "
                            "mode: use OpenTelemetry",
                            "error": None,
                        }
                    )
                else:
                    successes.append({"id": event_id, "status": 201})
                continue
            score = dict(event["body"])
            refused = self._check_score(score)
            if refused:
                errors.append({"id": event_id, "status": refused[0], "message": refused[1], "error": None})
                continue
            self.ingestion_events.add(event_id)
            # processScoreEventList: the score's timestamp is the envelope's.
            self._store(score, event.get("timestamp"), "ingestion")
            successes.append({"id": event_id, "status": 201})
        return 207, {"successes": successes, "errors": errors}

    def _get_scores(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        limit = _int(params, "limit", 50, 100)
        exclusive = [p for p in ("traceId", "sessionId", "experimentId") if p in params]
        if len(exclusive) > 1:
            raise _Reply(400, f"{', '.join(exclusive)} cannot be combined")
        if "observationId" in params and "traceId" not in params:
            raise _Reply(400, "observationId requires traceId")
        filters = {
            name: q.csv(params, name)
            for name in (
                "id",
                "name",
                "dataType",
                "environment",
                "configId",
                "traceId",
                "sessionId",
                "observationId",
                "queueId",
                "authorUserId",
            )
        }
        experiment_ids = q.csv(params, "experimentId")
        source = {s.upper() for s in q.csv(params, "source")}
        start, end = q.parse_time(q.one(params, "fromTimestamp")), q.parse_time(q.one(params, "toTimestamp"))
        groups = {g for g in (q.one(params, "fields") or "").split(",") if g}
        if unknown := groups - SCORE_FIELD_GROUPS:
            raise _Reply(400, f"Invalid fields: {', '.join(sorted(unknown))} (allowed: details, subject, annotation)")
        out = []
        for stored in self.store.latest_by_id():
            body = stored.body
            if any(
                values and str(body.get(name)) not in values for name, values in filters.items() if name != "dataType"
            ):
                continue
            data_type = body.get("dataType") or "NUMERIC"
            if filters["dataType"] and data_type not in filters["dataType"]:
                continue
            if experiment_ids and body.get("datasetRunId") not in experiment_ids:
                continue
            if source and str(body.get("source") or "API").upper() not in source:
                continue
            if not q.in_window(stored.timestamp, start, end) and (start or end):
                continue
            out.append(self._score_v3(stored, data_type, groups))
        out.sort(key=lambda s: (s["timestamp"], s["id"]), reverse=True)
        offset = q.decode_offset_cursor(q.one(params, "cursor"))
        cursor = q.encode_offset_cursor(offset + limit) if offset + limit < len(out) else None
        return 200, {"data": out[offset : offset + limit], "meta": {"limit": limit, "cursor": cursor}}

    @staticmethod
    def _score_v3(stored: Any, data_type: str, groups: set[str]) -> dict[str, Any]:
        body = stored.body
        value = body.get("value")
        if data_type == "BOOLEAN":
            value = bool(value)
        score: dict[str, Any] = {
            "id": body["id"],
            "projectId": PROJECT_ID,
            "name": body["name"],
            "value": value,
            "dataType": data_type,
            "source": body.get("source") or "API",
            "timestamp": stored.timestamp,
            "environment": body.get("environment") or "default",
            "createdAt": stored.first_received,
            "updatedAt": stored.last_received,
        }
        if "details" in groups:
            score.update(comment=body.get("comment"), configId=body.get("configId"), metadata=body.get("metadata"))
        if "annotation" in groups:
            score.update(authorUserId=body.get("authorUserId"), queueId=body.get("queueId"))
        if "subject" in groups:
            if body.get("observationId"):
                score["subject"] = {"kind": "observation", "id": body["observationId"], "traceId": body.get("traceId")}
            elif body.get("traceId"):
                score["subject"] = {"kind": "trace", "id": body["traceId"]}
            elif body.get("sessionId"):
                score["subject"] = {"kind": "session", "id": body["sessionId"]}
            else:
                score["subject"] = {"kind": "experiment", "id": body.get("datasetRunId")}
        return score

    def add_annotation(self, score: dict[str, Any], timestamp: str | None = None) -> None:
        """A score a person gave in Langfuse's UI (``source`` ANNOTATION, with ``authorUserId`` and, from a
        queue, ``queueId``): the API cannot create these, so a test or a demo seeds them here."""
        self.store.upsert({**score, "source": "ANNOTATION"}, timestamp, "annotation")

    def add_queue(
        self,
        queue_id: str,
        name: str,
        score_config_ids: Sequence[str] = (),
        traces: Sequence[str] = (),
        observations: Sequence[str] = (),
    ) -> None:
        """An annotation queue (queues are made in the UI; the API only reads them and adds items), holding
        these traces and observations (pending)."""
        self.queues[queue_id] = {"name": name, "scoreConfigIds": list(score_config_ids), "items": []}
        for trace_id in traces:
            self._new_queue_item(queue_id, trace_id, "TRACE", "PENDING")
        for observation_id in observations:
            self._new_queue_item(queue_id, observation_id, "OBSERVATION", "PENDING")

    def _new_queue_item(self, queue_id: str, object_id: str, object_type: str, status: str) -> dict[str, Any]:
        queue = self.queues[queue_id]
        now = self.clock_now().isoformat().replace("+00:00", "Z")
        item = {
            "id": f"queue-item-{len(queue['items']) + 1}-{queue_id}",
            "queueId": queue_id,
            "objectId": object_id,
            "objectType": object_type,
            "status": status,
            "completedAt": now if status == "COMPLETED" else None,
            "createdAt": now,
            "updatedAt": now,
        }
        queue["items"].append(item)
        return item

    def _queue(self, queue_id: str) -> dict[str, Any]:
        queue = self.queues.get(queue_id)
        if queue is None:
            raise _Reply(404, "Annotation queue not found")
        return queue

    def _queue_items(self, request: Request, path: dict[str, str]) -> tuple[int, Any]:
        queue = self._queue(path["queueId"])
        params = request.query()
        page, limit = max(_int(params, "page", 1, 10**9), 1), _int(params, "limit", 50, 100)
        status = q.one(params, "status")
        # Newest first (``createdAt`` desc, then id desc), as Langfuse lists them.
        items = [i for i in reversed(queue["items"]) if status is None or i["status"] == status]
        data = items[(page - 1) * limit : page * limit]
        pages = -(-len(items) // limit)
        return 200, {
            "data": data,
            "meta": {"page": page, "limit": limit, "totalItems": len(items), "totalPages": pages},
        }

    def _add_queue_item(self, request: Request, path: dict[str, str]) -> tuple[int, Any]:
        """A new item each time, as Langfuse's route creates one (the same object twice is two items)."""
        self._queue(path["queueId"])
        body = request.json()
        status = body.get("status") or "PENDING"
        return 200, self._new_queue_item(path["queueId"], body["objectId"], body["objectType"], status)

    # --- OTLP --------------------------------------------------------------------------------

    def _otlp(self, request: Request) -> Response:
        body = self._otlp_body(request)
        spans = [
            span
            for resource in body.get("resourceSpans") or []
            for scope in resource.get("scopeSpans") or []
            for span in scope.get("spans") or []
        ]
        self.otel_requests += 1
        self.otel_spans += len(spans)
        for span in spans:
            if len(self.otel_summaries) >= 10_000:
                break
            attributes = {}
            for attribute in span.get("attributes") or []:
                value = attribute.get("value") or {}
                text = next(iter(value.values()), None) if value else None
                attributes[attribute.get("key")] = str(text)[:200] if text is not None else None
            self.otel_summaries.append(
                {"name": span.get("name"), "traceId": span.get("traceId"), "attributes": attributes}
            )
        if request.header("content-type").startswith("application/x-protobuf"):
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

            return Response(
                200, ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
            )
        payload: dict[str, Any] = {}
        try:
            self.contract.check_response("POST", OTLP[1], 200, payload)
        except ContractViolation as error:
            self.violation(f"answer: {error}")
        return Response.json(200, payload)

    # --- v3 ----------------------------------------------------------------------------------

    def _v3_trace(
        self, rendered_root: RowRecord, header: TraceHeader, now: datetime, fields: set[str]
    ) -> dict[str, Any] | None:
        visible = rendered_root.visible_rows(now)
        if not visible:
            return None
        root = visible[0]
        io = "io" in fields
        latency: float | None = -1.0
        if "metrics" in fields:
            latency = (
                (datetime.fromisoformat(root["endTime"]) - datetime.fromisoformat(root["startTime"])).total_seconds()
                if root.get("endTime")
                else None
            )
        return {
            "id": header.trace_id,
            "timestamp": root["startTime"],
            "name": root.get("traceName") or root.get("name"),
            "input": _parse_io(root.get("input")) if io else None,
            "output": _parse_io(root.get("output")) if io else None,
            "sessionId": root.get("sessionId"),
            "release": root.get("release"),
            "version": root.get("version"),
            "userId": root.get("userId"),
            "metadata": root.get("metadata"),
            "tags": list(root.get("tags") or []),
            "public": False,
            "environment": root.get("environment") or "default",
            "htmlPath": f"/project/{PROJECT_ID}/traces/{header.trace_id}",
            "latency": latency,
            "totalCost": 0.0,
            "observations": [],
            "scores": [],
        }

    def _traces(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 1000)
        field_name, descending = q.v3_order(params)
        if field_name != "timestamp":
            raise q.UnsupportedQuery(f"orderBy {field_name}")
        fields = set((q.one(params, "fields") or "core,io,scores,observations,metrics").split(","))
        conditions = q.parse_filter(params) if self.profile.traces_filter else []
        if not self.profile.traces_filter:
            params = {k: v for k, v in params.items() if k != "filter"}  # zod drops unknown keys
        if not self.profile.traces_env_metadata:
            params = {k: v for k, v in params.items() if k != "environment"}
            conditions = [c for c in conditions if c.get("column") not in ("environment", "metadata")]
        simple = q.effective_simple_params(params, conditions, q.V3_SIMPLE_COLUMNS)
        low, high = q.parse_time(q.one(simple, "fromTimestamp")), q.parse_time(q.one(simple, "toTimestamp"))
        now = self.clock_now()
        matched = []
        for header in self._headers_desc(low, high):
            trace = self._v3_trace(self.corpus.root_record(header), header, now, fields | {"io"})
            if trace is not None and q.v3_trace_matches(trace, params, conditions):
                matched.append((header, trace))
        if not descending:
            matched.reverse()
        chunk = matched[(page - 1) * limit : page * limit]
        data = []
        for header, trace in chunk:
            if "io" not in fields:
                trace = {**trace, "input": None, "output": None}
            if "observations" in fields:
                trace["observations"] = [r["id"] for r in self.corpus.render(header).visible_rows(now)]
            data.append(trace)
        return 200, {"data": data, "meta": q.page_meta(page, limit, len(matched))}

    def _trace(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        header = self.corpus.find(params["traceId"])
        now = self.clock_now()
        if header is None:
            raise _Reply(404, f"Trace {params['traceId']} not found within authorized project")
        rendered: RenderedTrace = self.corpus.render(header)
        trace = self._v3_trace(rendered.root, header, now, {"io", "metrics"})
        if trace is None:
            raise _Reply(404, f"Trace {params['traceId']} not found within authorized project")
        seen: dict[str, dict[str, Any]] = {}
        for row in rendered.visible_rows(now):
            seen.setdefault(row["id"], row)  # v3 answers merged observations: the finished row first
        shape = _v2_observation if self._v2_rows else _v3_observation
        trace["observations"] = [shape(row) for row in seen.values()]
        trace["scores"] = []
        return 200, trace

    def _sessions(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        """``GET /sessions`` (legacy servers; 404 in v4 ``events_only``): sessions created (their first
        visible trace) in ``[fromTimestamp, toTimestamp)``, newest first, page/limit."""
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, 100)
        low, high = q.parse_time(q.one(params, "fromTimestamp")), q.parse_time(q.one(params, "toTimestamp"))
        environments = params.get("environment") or []
        now = self.clock_now()
        first: dict[str, dict[str, Any]] = {}
        for header in self._headers_desc(None, now):  # newest first: the last one seen is the first trace
            root = self.corpus.root_record(header)
            session_id = root.row.get("sessionId")
            trace = self._v3_trace(root, header, now, set()) if session_id else None
            if trace is not None:
                first[session_id] = trace
        rows = [
            {"id": sid, "createdAt": t["timestamp"], "projectId": PROJECT_ID, "environment": t["environment"]}
            for sid, t in first.items()
            if (low is None or datetime.fromisoformat(t["timestamp"]) >= low)
            and (high is None or datetime.fromisoformat(t["timestamp"]) < high)
            and (not environments or t["environment"] in environments)
        ]
        rows.sort(key=lambda r: (r["createdAt"], r["id"]), reverse=True)
        total = len(rows)
        meta = {"page": page, "limit": limit, "totalItems": total, "totalPages": -(-total // limit)}
        return 200, {"data": rows[(page - 1) * limit : page * limit], "meta": meta}

    def _session(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        """``GET /sessions/{id}`` (legacy servers; 404 in v4 ``events_only``): the session's traces, all of
        them (not paged), oldest first; 404 when no visible trace names it."""
        now = self.clock_now()
        traces = []
        for header in reversed(list(self._headers_desc(None, now))):
            root = self.corpus.root_record(header)
            if root.row.get("sessionId") != params["sessionId"]:
                continue
            trace = self._v3_trace(root, header, now, {"io"})
            if trace is not None:
                traces.append(trace)
        if not traces:
            raise _Reply(404, f"Session {params['sessionId']} not found")
        session = {"id": params["sessionId"], "createdAt": traces[0]["timestamp"], "projectId": PROJECT_ID}
        return 200, {**session, "environment": traces[0].get("environment") or "default", "traces": traces}

    def _legacy_observations(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        """``GET /observations`` (v1) as 3.x (ClickHouse) and 2.x (PostgreSQL) serve it, the harsher way
        where they differ: ``limit`` ≤ 100 (zod), ``page`` from 1 with OFFSET paging, ``start_time DESC``
        only, so rows of one ``startTime`` come in another order on every page (a tie across a page
        boundary can be served twice or not at all); ``fromStartTime`` ``>=``, ``toStartTime`` ``<``.
        3.x pages distinct observations (its keys CTE) and then, without ``FINAL``, answers every unmerged
        row of each: a page can hold more rows than ``limit``, duplicates side by side, and ``totalItems``
        counts rows, not observations. 2.x: one row per observation, 2.x's row shape, no ``environment``."""
        params = request.query()
        page, limit = _int(params, "page", 1), _int(params, "limit", 50, LEGACY_MAX_LIMIT)
        if q.one(params, "filter"):
            raise q.UnsupportedQuery("filter on GET /observations")
        if self._v2_rows:
            params = {k: v for k, v in params.items() if k != "environment"}  # 2.x has no environments
        if self.options.observations_without_to_start_time:
            params = {k: v for k, v in params.items() if k != "toStartTime"}
        low, high = q.parse_time(q.one(params, "fromStartTime")), q.parse_time(q.one(params, "toStartTime"))
        trace_ids = set(params.get("traceId", ()))
        versions: dict[str, list[dict[str, Any]]] = {}
        newest_first: dict[str, int] = {}
        for key, row in self._rows_desc(low, high, None, False, trace_ids):
            if q.observation_matches(row, params, []):
                versions.setdefault(row["id"], []).append(row)
                newest_first.setdefault(row["id"], key[0])
        ordered = sorted(versions, key=lambda i: (newest_first[i], _tie_order(page, i)))
        chosen = ordered[(page - 1) * limit : page * limit]
        if self._v2_rows:
            data = [_v2_observation(versions[i][0]) for i in chosen]  # the finished row sorts first
            total = len(ordered)
        else:
            data = [_v3_observation(row) for i in chosen for row in versions[i]]
            total = sum(len(rows) for rows in versions.values())
        self.rows_served += len(data)
        return 200, {"data": data, "meta": q.page_meta(page, limit, total)}

    def _runs_of(self, dataset: dict[str, Any]) -> list[dict[str, Any]]:
        items = self._visible_items()
        runs = []
        for experiment in self.corpus.experiments:
            if experiment["datasetId"] != dataset["id"]:
                continue
            mine = [i for i in items if i["experimentId"] == experiment["id"]]
            if not mine:
                continue
            runs.append(
                {
                    "id": experiment["id"],
                    "name": experiment["name"],
                    "description": experiment.get("description"),
                    "metadata": experiment.get("metadata"),
                    "datasetId": dataset["id"],
                    "datasetName": dataset["name"],
                    # Written once when the run is created (createOrFetchDatasetRun); items never touch it.
                    "createdAt": min(i["startTime"] for i in mine),
                    "updatedAt": min(i["startTime"] for i in mine),
                }
            )
        runs += [r for r in self.corpus.dataset_runs if r["datasetId"] == dataset["id"]]
        runs.sort(key=lambda r: r["createdAt"], reverse=True)
        return runs

    def _runs(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        query = request.query()
        dataset = self.corpus.datasets.get(params["datasetName"])
        if dataset is None:
            raise _Reply(404, f"Dataset {params['datasetName']} not found")
        page, limit = _int(query, "page", 1), _int(query, "limit", 50, 100)
        runs = self._runs_of(dataset)
        return 200, {"data": runs[(page - 1) * limit : page * limit], "meta": q.page_meta(page, limit, len(runs))}

    def _run_item_rows(self, dataset_id: str | None, run_name: str | None) -> list[dict[str, Any]]:
        rows = []
        for item in self._visible_items():
            if item["experimentDatasetId"] != dataset_id or item["experimentName"] != run_name:
                continue
            rows.append(
                {
                    "id": f"ri-{item['id']}",
                    "datasetRunId": item["experimentId"],
                    "datasetRunName": item["experimentName"],
                    "datasetItemId": item["experimentItemId"],
                    "traceId": item["traceId"],
                    "observationId": None,
                    "createdAt": item["startTime"],
                    "updatedAt": item["endTime"] or item["startTime"],
                }
            )
        runs = {r["id"] for r in self.corpus.dataset_runs if r["datasetId"] == dataset_id and r["name"] == run_name}
        rows += [i for i in self.corpus.dataset_run_items if i["datasetRunId"] in runs]
        rows.sort(key=lambda r: r["createdAt"])
        return rows

    def _run_items(self, request: Request, _: dict[str, str]) -> tuple[int, Any]:
        query = request.query()
        page, limit = _int(query, "page", 1), _int(query, "limit", 50, 100)
        rows = self._run_item_rows(q.one(query, "datasetId"), q.one(query, "runName"))
        return 200, {"data": rows[(page - 1) * limit : page * limit], "meta": q.page_meta(page, limit, len(rows))}

    def _run(self, request: Request, params: dict[str, str]) -> tuple[int, Any]:
        """``GET /datasets/{name}/runs/{runName}``: the run with all its items (how 2.x serves them)."""
        dataset = self.corpus.datasets.get(params["datasetName"])
        if dataset is None:
            raise _Reply(404, f"Dataset {params['datasetName']} not found")
        run = next((r for r in self._runs_of(dataset) if r["name"] == params["runName"]), None)
        if run is None:
            raise _Reply(404, "Dataset run not found")
        return 200, {**run, "datasetRunItems": self._run_item_rows(dataset["id"], run["name"])}

    # --- control -----------------------------------------------------------------------------

    def extra_stats(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "rows_served": self.rows_served,
            "bytes_served": self.bytes_served,
            "score_posts": self.score_posts,
            "scores_stored": len(self.store.scores),
            "score_writes": self.store.writes,
            "otel_requests": self.otel_requests,
            "otel_spans": self.otel_spans,
            "repeat_boundary_rows": self.options.repeat_boundary_rows,
        }

    async def control(self, request: Request, name: str) -> Response | None:
        method = request.method
        if method == "GET" and name == "scores":
            params = request.query()
            names, traces = q.csv(params, "name"), q.csv(params, "traceId")
            out = [
                s.to_json()
                for s in self.store.scores.values()
                if (not names or s.body.get("name") in names) and (not traces or s.body.get("traceId") in traces)
            ]
            return Response.json(200, {"data": out})
        if method == "GET" and name == "scores/summary":
            return Response.json(200, self.store.summary())
        if method == "POST" and name == "scores/clear":
            self.store.clear()
            return Response.json(200, {"ok": True})
        if method == "POST" and name == "scores/reject":
            body = request.json() or {}
            message = body.get("message") or "rejected by the stand-in"
            self.reject_names = {n: f"{message} ({n})" for n in body.get("names") or []}
            return Response.json(200, {"reject": sorted(self.reject_names)})
        if method == "POST" and name == "score-configs":
            body = request.json() or {}
            try:
                added = [self.add_config(c) for c in body.get("configs") or []]
            except _Reply as reply:
                raise ValueError(str(reply)) from None
            return Response.json(200, {"data": added})
        if method == "POST" and name == "traces":
            body = request.json() or {}
            headers = [self.corpus.add_trace(rows) for rows in body.get("traces") or []]
            return Response.json(200, {"added": [h.trace_id for h in headers]})
        if method == "POST" and name == "options":
            body = request.json() or {}
            if "repeat_boundary_rows" in body:
                self.options.repeat_boundary_rows = bool(body["repeat_boundary_rows"])
            if "validate_answers" in body:
                if body["validate_answers"] not in ("all", "sample", "none"):
                    raise ValueError("validate_answers is all, sample or none")
                self.options.validate_answers = str(body["validate_answers"])
            return Response.json(
                200,
                {
                    "repeat_boundary_rows": self.options.repeat_boundary_rows,
                    "validate_answers": self.options.validate_answers,
                },
            )
        if method == "GET" and name == "otel":
            return Response.json(
                200, {"requests": self.otel_requests, "spans": self.otel_spans, "summaries": self.otel_summaries}
            )
        if method == "GET" and name == "corpus":
            return Response.json(200, self._corpus_summary(request.query()))
        return None

    def _corpus_summary(self, params: q.Params) -> dict[str, Any]:
        corpus = self.corpus
        out: dict[str, Any] = {
            "scenario": corpus.scenario.to_dict(),
            "end": q.iso(corpus.end),
            "production_traces": len(corpus.production),
            "experiment_traces": len(corpus.experiments_source),
            "extra_traces": len(corpus.extra),
            "datasets": sorted(corpus.datasets),
            "experiments": [e["id"] for e in corpus.experiments],
        }
        if q.one(params, "ids") == "production":
            environment = q.one(params, "environment") or "production"
            out["trace_ids"] = corpus.expected_scored(environment)
            out["hostile"] = {
                h.trace_id: h.hostile for h in corpus.production_headers() if h.hostile and h.environment == environment
            }
        if q.one(params, "ids") == "experiments":
            out["items"] = [
                {"traceId": i["traceId"], "experimentId": i["experimentId"], "datasetItemId": i["experimentItemId"]}
                for i in corpus.experiment_item_rows()
            ]
        return out


# --- command line -------------------------------------------------------------------------------------


def options_to_argv(options: LangfuseOptions) -> list[str]:
    """CLI flags that rebuild ``options`` in another process (``python -m standins.langfuse_server``)."""
    assert options.generation is not None
    argv = [
        "--generation", options.generation,
        "--write-mode", options.write_mode,
        "--overrides-json", json.dumps(options.overrides),
        "--score-configs-json", json.dumps(list(options.score_configs)),
        "--evaluators-json", json.dumps(list(options.evaluators)),
        "--evaluation-rules-json", json.dumps(list(options.evaluation_rules)),
        "--scenario-json", json.dumps(options.scenario.to_dict()),
        "--faults-json", json.dumps(options.faults.to_dict()),
        "--cache-size", str(options.cache_size),
        "--public-key", options.public_key,
        "--secret-key", options.secret_key,
        "--more-keys-json", json.dumps([list(pair) for pair in options.more_keys]),
    ]  # fmt: skip
    if options.version:
        argv += ["--version", options.version]
    if options.repeat_boundary_rows:
        argv.append("--repeat-boundary-rows")
    if options.export_delay is not None:
        argv += ["--export-delay", str(options.export_delay)]
    if options.heavy_read_limit is not None:
        argv += ["--heavy-read-limit", str(options.heavy_read_limit)]
    if options.heavy_read_bytes is not None:
        argv += ["--heavy-read-bytes", str(options.heavy_read_bytes)]
    argv += ["--validate-answers", options.validate_answers, "--url-limit", options.url_limit]
    if not options.keep_score_details:
        argv.append("--no-score-details")
    return argv


def parse_args(argv: list[str] | None = None) -> tuple[int, LangfuseOptions]:
    parser = argparse.ArgumentParser(
        prog="python -m standins.langfuse_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="0: the OS picks (printed on stdout)")
    parser.add_argument(
        "--generation", choices=sorted(DEFAULT_VERSION), default=None, help="v4 (default: 4.16.0) or v3 (3.120.0)"
    )
    parser.add_argument(
        "--version", default=None, help=f"the server version to behave as ({', '.join(VERSIONS)}); implies --generation"
    )
    parser.add_argument("--write-mode", choices=WRITE_MODES, default="events_only", help="v4 write mode")
    parser.add_argument("--export-delay", type=float, help="v4: seconds from a span's end to its row's visibility")
    parser.add_argument("--heavy-read-limit", type=int, help="422 on /v2/observations with io above this limit")
    parser.add_argument("--heavy-read-bytes", type=int, help="422 on /v2/observations with io over this many bytes")
    parser.add_argument("--overrides-json", default="{}", help="ServerProfile flags, as JSON")
    parser.add_argument("--score-configs-json", default="[]", help="score configs present at start, as JSON")
    parser.add_argument("--evaluators-json", default="[]", help="project evaluators present at start, as JSON")
    parser.add_argument("--evaluation-rules-json", default="[]", help="evaluation rules present at start, as JSON")
    parser.add_argument("--public-key", default=PUBLIC_KEY)
    parser.add_argument("--secret-key", default=SECRET_KEY)
    parser.add_argument("--more-keys-json", default="[]", help="more [public, secret] key pairs, as JSON")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--traces", type=int, help="production traces in the backlog")
    parser.add_argument("--live", type=int, help="production traces arriving after start, in real time")
    parser.add_argument("--spacing", type=float, help="seconds between trace starts")
    parser.add_argument("--end", help="ISO time the backlog ends at (default: now)")
    parser.add_argument("--scenario-json", default="{}", help="any Scenario field, as JSON (flags above win)")
    parser.add_argument("--latency", type=float)
    parser.add_argument("--rate-429", type=float)
    parser.add_argument("--retry-after", type=float)
    parser.add_argument("--rate-5xx", type=float)
    parser.add_argument("--rate-drop", type=float)
    parser.add_argument("--faults-json", default="{}", help="any FaultConfig field, as JSON (flags above win)")
    parser.add_argument("--repeat-boundary-rows", action="store_true", help="duplicate rows across pages")
    parser.add_argument("--cache-size", type=int, default=4096)
    parser.add_argument("--validate-answers", choices=("all", "sample", "none"), default="all")
    parser.add_argument("--no-score-details", action="store_true")
    parser.add_argument("--url-limit", choices=sorted(URL_LIMITS), default="node", help="request size limit")
    args = parser.parse_args(argv)
    scenario = json.loads(args.scenario_json)
    for flag, key in (("seed", "seed"), ("traces", "traces"), ("live", "live"), ("spacing", "spacing"), ("end", "end")):
        if getattr(args, flag) is not None:
            scenario[key] = getattr(args, flag)
    faults = json.loads(args.faults_json)
    for flag in ("latency", "rate_429", "retry_after", "rate_5xx", "rate_drop"):
        if getattr(args, flag) is not None:
            faults[flag] = getattr(args, flag)
    options = LangfuseOptions(
        generation=args.generation,
        version=args.version,
        write_mode=args.write_mode,
        export_delay=args.export_delay,
        heavy_read_limit=args.heavy_read_limit,
        heavy_read_bytes=args.heavy_read_bytes,
        url_limit=args.url_limit,
        overrides=json.loads(args.overrides_json),
        score_configs=tuple(json.loads(args.score_configs_json)),
        evaluators=tuple(json.loads(args.evaluators_json)),
        evaluation_rules=tuple(json.loads(args.evaluation_rules_json)),
        public_key=args.public_key,
        secret_key=args.secret_key,
        more_keys=tuple((str(public), str(secret)) for public, secret in json.loads(args.more_keys_json)),
        scenario=Scenario.from_dict(scenario),
        faults=FaultConfig.from_dict(faults),
        repeat_boundary_rows=args.repeat_boundary_rows,
        validate_answers=args.validate_answers,
        keep_score_details=not args.no_score_details,
        cache_size=args.cache_size,
    )
    return args.port, options


def main(argv: list[str] | None = None) -> int:
    from standins.http import serve_forever

    port, options = parse_args(argv)
    app = LangfuseApp(options)

    def announce(bound: int) -> None:
        print(
            json.dumps({"port": bound, "url": f"http://127.0.0.1:{bound}", "pid": __import__("os").getpid()}),
            flush=True,
        )

    serve_forever(app.handle, port=port, announce=announce)
    return 0


__all__ = ["PUBLIC_KEY", "SECRET_KEY", "LangfuseApp", "LangfuseOptions", "main", "options_to_argv"]

if __name__ == "__main__":
    sys.exit(main())

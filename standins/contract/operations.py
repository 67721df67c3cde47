"""Every Langfuse operation the stand-in serves, written down by us: route, query parameters, body, answers.

What the installed ``langfuse`` package models (the v4 API's request and answer shapes) is taken from it;
what it does not carry — the routes, their query parameters and required ones, the statuses, and the
legacy routes' shapes (:mod:`standins.contract.legacy`) — is this table, kept to what real servers do
(docs/langfuse.md). A route missing here is not served; a parameter missing here is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import unquote

from langfuse.api.annotation_queues.types.annotation_queue_item import AnnotationQueueItem
from langfuse.api.annotation_queues.types.create_annotation_queue_item_request import (
    CreateAnnotationQueueItemRequest,
)
from langfuse.api.annotation_queues.types.paginated_annotation_queue_items import PaginatedAnnotationQueueItems
from langfuse.api.commons.types.dataset import Dataset
from langfuse.api.commons.types.dataset_item import DatasetItem
from langfuse.api.commons.types.observation_level import ObservationLevel
from langfuse.api.commons.types.score_config import ScoreConfig
from langfuse.api.datasets.types.paginated_datasets import PaginatedDatasets
from langfuse.api.experiments.types.experiment_items_response import ExperimentItemsResponse
from langfuse.api.experiments.types.experiments_response import ExperimentsResponse
from langfuse.api.health.types.health_response import HealthResponse
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.opentelemetry.types.otel_resource_span import OtelResourceSpan
from langfuse.api.opentelemetry.types.otel_trace_response import OtelTraceResponse
from langfuse.api.projects.types.projects import Projects
from langfuse.api.score_configs.types.create_score_config_request import CreateScoreConfigRequest
from langfuse.api.score_configs.types.score_configs import ScoreConfigs
from langfuse.api.scores.types.create_score_batch_response import CreateScoreBatchResponse
from langfuse.api.scores.types.create_score_batch_results import CreateScoreBatchResults
from langfuse.api.scores.types.create_score_request import CreateScoreRequest
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response
from langfuse.api.scores.types.score_body import ScoreBody

from standins.contract import legacy, unstable


class ContractViolation(AssertionError):
    """A request or answer that does not keep Langfuse's contract."""


class Kind(Enum):
    """How a query parameter's text is read."""

    TEXT = "a string"
    INTEGER = "an integer"
    NUMBER = "a number"
    BOOLEAN = "a boolean (true or false)"
    DATETIME = "a date-time with an offset"
    LEVEL = "an observation level"


@dataclass(frozen=True)
class Param:
    kind: Kind = Kind.TEXT
    required: bool = False
    #: Given once per value (``environment=a&environment=b``); any other parameter is given at most once.
    repeated: bool = False


TEXT, INTEGER, NUMBER, BOOLEAN, DATETIME = (
    Param(),
    Param(Kind.INTEGER),
    Param(Kind.NUMBER),
    Param(Kind.BOOLEAN),
    Param(Kind.DATETIME),
)
TEXTS = Param(repeated=True)

LEVELS = tuple(level.value for level in ObservationLevel.__members__.values())


class Body(Enum):
    """How a request's JSON body is checked (see :meth:`Contract.check_request`)."""

    #: One model, the whole body.
    MODEL = "model"
    #: ``POST /scores``: a non-empty list of ``CreateScoreRequest`` (servers ≥ 4.59), or one (older servers).
    SCORES = "scores"
    #: ``POST /ingestion``: the envelope (:class:`legacy.IngestionBatch`), score events' bodies as ``ScoreBody``.
    INGESTION = "ingestion"
    #: OTLP/JSON: ``resourceSpans``, each a package ``OtelResourceSpan``.
    OTLP = "otlp"


#: The package's model of a score inside an ingestion event, and of one element of ``POST /scores``.
SCORE_EVENT_BODY = ScoreBody
SCORE_ELEMENT = CreateScoreRequest
RESOURCE_SPAN = OtelResourceSpan


@dataclass(frozen=True)
class Operation:
    method: str
    #: The path template (``{name}`` a path parameter, one segment).
    path: str
    query: Mapping[str, Param] = field(default_factory=dict)
    body: Body | None = None
    body_model: Any = None
    #: Status → the model its answer must validate as (errors, 4xx/5xx, are checked apart).
    answers: Mapping[int, Any] = field(default_factory=dict)
    #: Statuses only servers before 4.59 send (``scores_body="single"``).
    single_answers: Mapping[int, Any] = field(default_factory=dict)
    #: The answers are the ``langfuse`` package's models (v4 API); else ours (:mod:`legacy`).
    package: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.method, self.path)


@dataclass(frozen=True)
class Match:
    """An operation matched by a request's method and raw path."""

    operation: Operation
    path_params: Mapping[str, str]

    @property
    def method(self) -> str:
        return self.operation.method

    @property
    def path(self) -> str:
        return self.operation.path


_PAGE = {"page": INTEGER, "limit": INTEGER}

OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/api/public/health", answers={200: HealthResponse}),
    Operation("GET", "/api/public/projects", answers={200: Projects}),
    Operation("GET", "/api/public/score-configs", _PAGE, answers={200: ScoreConfigs}),
    Operation(
        "POST",
        "/api/public/score-configs",
        body=Body.MODEL,
        body_model=CreateScoreConfigRequest,
        answers={200: ScoreConfig},
    ),
    Operation("GET", "/api/public/score-configs/{configId}", answers={200: ScoreConfig}),
    Operation("GET", "/api/public/v2/datasets", _PAGE, answers={200: PaginatedDatasets}),
    Operation("GET", "/api/public/v2/datasets/{datasetName}", answers={200: Dataset}),
    Operation("GET", "/api/public/dataset-items/{id}", answers={200: DatasetItem}),
    Operation("GET", "/api/public/unstable/evaluators", _PAGE, answers={200: unstable.Evaluators}, package=False),
    Operation("GET", "/api/public/unstable/evaluation-rules", _PAGE, answers={200: unstable.Rules}, package=False),
    Operation(
        "GET",
        "/api/public/v2/observations",
        {
            "fields": TEXT,
            "expandMetadata": TEXT,
            "limit": INTEGER,
            "cursor": TEXT,
            "parseIoAsJson": BOOLEAN,
            "name": TEXT,
            "userId": TEXT,
            "sessionId": TEXT,
            "type": TEXT,
            "traceId": TEXT,
            "level": Param(Kind.LEVEL),
            "parentObservationId": TEXT,
            "isRootObservation": BOOLEAN,
            "environment": TEXTS,
            "fromStartTime": DATETIME,
            "toStartTime": DATETIME,
            "version": TEXT,
            "filter": TEXT,
        },
        answers={200: ObservationsV2Response},
    ),
    Operation(
        "GET",
        "/api/public/experiments",
        {
            "fields": TEXT,
            "limit": INTEGER,
            "scoreLimit": INTEGER,
            "cursor": TEXT,
            "fromStartTime": Param(Kind.DATETIME, required=True),
            "toStartTime": DATETIME,
            "id": TEXT,
            "name": TEXT,
            "datasetId": TEXT,
            "filter": TEXT,
        },
        answers={200: ExperimentsResponse},
    ),
    Operation(
        "GET",
        "/api/public/experiment-items",
        {
            "fields": TEXT,
            "limit": INTEGER,
            "scoreLimit": INTEGER,
            "cursor": TEXT,
            "fromStartTime": Param(Kind.DATETIME, required=True),
            "toStartTime": DATETIME,
            "experimentId": TEXT,
            "experimentName": TEXT,
            "experimentItemId": TEXT,
            "datasetId": TEXT,
            "filter": TEXT,
        },
        answers={200: ExperimentItemsResponse},
    ),
    Operation(
        "POST",
        "/api/public/scores",
        body=Body.SCORES,
        answers={202: CreateScoreBatchResponse, 207: CreateScoreBatchResults},
        single_answers={200: legacy.CreatedScore},
    ),
    Operation(
        "GET",
        "/api/public/v3/scores",
        {
            "limit": INTEGER,
            "cursor": TEXT,
            "fields": TEXT,
            "id": TEXT,
            "name": TEXT,
            "source": TEXT,
            "dataType": TEXT,
            "environment": TEXT,
            "configId": TEXT,
            "queueId": TEXT,
            "authorUserId": TEXT,
            "value": TEXT,
            "valueMin": NUMBER,
            "valueMax": NUMBER,
            "traceId": TEXT,
            "sessionId": TEXT,
            "observationId": TEXT,
            "experimentId": TEXT,
            "fromTimestamp": DATETIME,
            "toTimestamp": DATETIME,
        },
        answers={200: GetScoresV3Response},
    ),
    Operation("POST", "/api/public/otel/v1/traces", body=Body.OTLP, answers={200: OtelTraceResponse}),
    Operation(
        "GET",
        "/api/public/annotation-queues/{queueId}/items",
        {"status": TEXT, **_PAGE},
        answers={200: PaginatedAnnotationQueueItems},
    ),
    Operation(
        "POST",
        "/api/public/annotation-queues/{queueId}/items",
        body=Body.MODEL,
        body_model=CreateAnnotationQueueItemRequest,
        answers={200: AnnotationQueueItem},
    ),
    # --- legacy (v3 routes; 2.x and 3.x servers, 4.x in dual write mode) --------------------------------
    Operation(
        "POST", "/api/public/ingestion", body=Body.INGESTION, answers={207: legacy.IngestionResponse}, package=False
    ),
    Operation(
        "GET",
        "/api/public/traces",
        {
            **_PAGE,
            "userId": TEXT,
            "name": TEXT,
            "sessionId": TEXT,
            "fromTimestamp": DATETIME,
            "toTimestamp": DATETIME,
            "orderBy": TEXT,
            "tags": TEXTS,
            "version": TEXT,
            "release": TEXT,
            "environment": TEXTS,
            "fields": TEXT,
            "filter": TEXT,
        },
        answers={200: legacy.Traces},
        package=False,
    ),
    Operation(
        "GET",
        "/api/public/traces/{traceId}",
        {"fields": TEXT},
        answers={200: legacy.TraceWithFullDetails},
        package=False,
    ),
    Operation(
        "GET",
        "/api/public/sessions",
        {**_PAGE, "fromTimestamp": DATETIME, "toTimestamp": DATETIME, "environment": TEXTS},
        answers={200: legacy.Sessions},
        package=False,
    ),
    Operation(
        "GET",
        "/api/public/sessions/{sessionId}",
        {},
        answers={200: legacy.SessionWithTraces},
        package=False,
    ),
    Operation(
        "GET",
        "/api/public/observations",
        {
            **_PAGE,
            "name": TEXT,
            "userId": TEXT,
            "type": TEXT,
            "traceId": TEXT,
            "level": Param(Kind.LEVEL),
            "parentObservationId": TEXT,
            "environment": TEXTS,
            "fromStartTime": DATETIME,
            "toStartTime": DATETIME,
            "version": TEXT,
            "filter": TEXT,
        },
        answers={200: legacy.ObservationViews},
        package=False,
    ),
    Operation(
        "GET", "/api/public/datasets/{datasetName}/runs", _PAGE, answers={200: legacy.DatasetRuns}, package=False
    ),
    Operation(
        "GET",
        "/api/public/dataset-run-items",
        {"datasetId": Param(required=True), "runName": Param(required=True), **_PAGE},
        answers={200: legacy.DatasetRunItems},
        package=False,
    ),
    Operation(
        "GET",
        "/api/public/datasets/{datasetName}/runs/{runName}",
        answers={200: legacy.DatasetRunWithItems},
        package=False,
    ),
)


class Routes:
    """The operations by method and path: literal paths before templated ones."""

    def __init__(self, operations: tuple[Operation, ...] = OPERATIONS) -> None:
        self.by_key = {operation.key: operation for operation in operations}
        self._patterns: list[tuple[re.Pattern[str], Operation]] = []
        for operation in sorted(operations, key=lambda o: o.path.count("{")):
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(operation.path)) + "$"
            self._patterns.append((re.compile(pattern), operation))

    def by_template(self, method: str, template: str) -> Operation:
        operation = self.by_key.get((method.upper(), template))
        if operation is None:
            raise ContractViolation(f"{method.upper()} {template}: no such operation in the contract")
        return operation

    def match(self, method: str, raw_path: str) -> Match:
        """The operation of ``method raw_path`` (percent-encoded: an encoded ``/`` stays in its segment)."""
        method = method.upper()
        for pattern, operation in self._patterns:
            found = pattern.match(raw_path)
            if found and operation.method == method:
                return Match(operation, {k: unquote(v) for k, v in found.groupdict().items()})
        raise ContractViolation(f"{method} {raw_path}: no such operation in the contract")

"""The contract the Langfuse adapter's tests keep (issue 4, "Contract for the tests").

- Every request must validate against ``langfuse-openapi.yml``: method and path, path and query
  parameters (typed, no unknown ones, required ones present), JSON body. ``POST /api/public/scores``
  takes one object on servers before 4.59 (the file's ``CreateScoreRequest``) and a non-empty *list* on
  newer ones (the ``langfuse`` 5.x package, each element a ``CreateScoreRequest``). ``check_request``'s
  ``scores_body`` says which: "list" (the default, the package's contract), "single" (the file's), or
  "any" (the stand-in: which shape a server accepts is the server's business — it answers the other
  with Langfuse's 400 — not a contract violation).
- Answers of v4 endpoints must be accepted by the ``langfuse`` package's own pydantic models; answers
  of the v3 legacy endpoints, which the package no longer models, must validate against the file.
- Error answers (4xx/5xx) are JSON objects with a string ``message``, as Langfuse sends them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pydantic
from langfuse.api.commons.types.dataset import Dataset
from langfuse.api.commons.types.dataset_item import DatasetItem
from langfuse.api.commons.types.score_config import ScoreConfig
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.experiments.types.experiment_items_response import ExperimentItemsResponse
from langfuse.api.experiments.types.experiments_response import ExperimentsResponse
from langfuse.api.health.types.health_response import HealthResponse
from langfuse.api.observations.types.observations_v2response import ObservationsV2Response
from langfuse.api.projects.types.projects import Projects
from langfuse.api.score_configs.types.score_configs import ScoreConfigs
from langfuse.api.scores.types.create_score_batch_response import CreateScoreBatchResponse
from langfuse.api.scores.types.create_score_batch_results import CreateScoreBatchResults
from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

from standins.contract.openapi import ContractViolation, OpenApi, check_filter_json, load_openapi

#: v4 operations → {status: the package model its answer must parse as}.
PACKAGE_MODELS: dict[tuple[str, str], dict[int, Any]] = {
    ("GET", "/api/public/health"): {200: HealthResponse},
    ("GET", "/api/public/projects"): {200: Projects},
    ("GET", "/api/public/score-configs"): {200: ScoreConfigs},
    ("POST", "/api/public/score-configs"): {200: ScoreConfig},
    ("GET", "/api/public/v2/observations"): {200: ObservationsV2Response},
    ("GET", "/api/public/experiments"): {200: ExperimentsResponse},
    ("GET", "/api/public/experiment-items"): {200: ExperimentItemsResponse},
    ("GET", "/api/public/v2/datasets/{datasetName}"): {200: Dataset},
    ("GET", "/api/public/dataset-items/{id}"): {200: DatasetItem},
    # The package (SDK 5, servers >= 4.59) says 202 or 207; older servers answer the file's 200 {id}.
    ("POST", "/api/public/scores"): {202: CreateScoreBatchResponse, 207: CreateScoreBatchResults},
    # Read back by the stand-in's users (the adapter itself does not read scores).
    ("GET", "/api/public/v3/scores"): {200: GetScoresV3Response},
}

#: Statuses of package-modelled operations that servers before 4.59 answer as the file says
#: (``check_response(..., scores_body="single")``).
FILE_STATUSES: dict[tuple[str, str], set[int]] = {("POST", "/api/public/scores"): {200}}

#: Operations whose request body the package defines differently from the file.
_LIST_BODIES = {("POST", "/api/public/scores"): "/components/schemas/CreateScoreRequest"}


def _coerce(value: str, schema: Mapping[str, Any], api: OpenApi) -> Any:
    """A query string value as the type its parameter schema declares (string otherwise)."""
    if "$ref" in schema:
        return value  # enums of strings
    if "anyOf" in schema:
        return _coerce(value, schema["anyOf"][0], api)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "integer" in kinds:
        try:
            return int(value)
        except ValueError:
            return value
    if "number" in kinds:
        try:
            return float(value)
        except ValueError:
            return value
    if "boolean" in kinds:
        return {"true": True, "false": False}.get(value, value)
    return value


class Contract:
    def __init__(self, api: OpenApi | None = None) -> None:
        self.api = api or load_openapi()

    # --- requests ----------------------------------------------------------------------------

    def check_request(self, method: str, url: httpx.URL | str, body: Any = None, *, scores_body: str = "list") -> str:
        """Validate one request; returns the operation's path template."""
        url = httpx.URL(url) if isinstance(url, str) else url
        raw_path = url.raw_path.decode("ascii").split("?", 1)[0]  # percent-encoded: "/" in an id stays one segment
        operation = self.api.operation(method, raw_path)
        what = f"{operation.method} {url.path}"
        parameters = operation.spec.get("parameters", [])
        declared = {(p["in"], p["name"]): (index, p) for index, p in enumerate(parameters)}
        for name, value in operation.path_params.items():
            index, _ = declared.get(("path", name), (None, None))
            if index is None:
                raise ContractViolation(f"{what}: path parameter {name!r} is not declared")
            self.api.validate(f"{operation.pointer}/parameters/{index}/schema", value, f"{what}: path {name}")
        values: dict[str, list[str]] = {}
        for name, value in url.params.multi_items():
            values.setdefault(name, []).append(value)
        for name, items in values.items():
            index, parameter = declared.get(("query", name), (None, None))
            if index is None or parameter is None:
                raise ContractViolation(f"{what}: query parameter {name!r} is not in the OpenAPI operation")
            schema = parameter["schema"]
            pointer = f"{operation.pointer}/parameters/{index}/schema"
            if schema.get("type") == "array":
                coerced: Any = [_coerce(v, schema.get("items", {}), self.api) for v in items]
            elif len(items) > 1:
                raise ContractViolation(f"{what}: query parameter {name!r} given {len(items)} times")
            else:
                coerced = _coerce(items[0], schema, self.api)
            self.api.validate(pointer, coerced, f"{what}: query {name}={items}")
            if name == "filter":
                check_filter_json(items[0], what)
        for (where, name), (_, parameter) in declared.items():
            if where == "query" and parameter.get("required") and name not in values:
                raise ContractViolation(f"{what}: required query parameter {name!r} missing")
        self._check_body(operation.method, operation.path, operation.pointer, operation.spec, body, what, scores_body)
        return operation.path

    def _check_body(
        self,
        method: str,
        template: str,
        pointer: str,
        spec: Mapping[str, Any],
        body: Any,
        what: str,
        scores_body: str = "list",
    ) -> None:
        request_body = spec.get("requestBody")
        if request_body is None:
            if body is not None:
                raise ContractViolation(f"{what}: the operation takes no body")
            return
        if body is None:
            if request_body.get("required"):
                raise ContractViolation(f"{what}: body required")
            return
        element = _LIST_BODIES.get((method, template))
        if element is not None and scores_body == "single" and not isinstance(body, dict):
            raise ContractViolation(f"{what}: body must be one JSON object (servers before 4.59)")
        if element is not None and not (scores_body in ("single", "any") and isinstance(body, dict)):
            if not isinstance(body, list) or not body:
                raise ContractViolation(f"{what}: body must be a non-empty JSON list")
            for index, item in enumerate(body):
                self.api.validate(element, item, f"{what}: body[{index}]")
            return
        self.api.validate(f"{pointer}/requestBody/content/application~1json/schema", body, f"{what}: body")

    # --- answers -----------------------------------------------------------------------------

    def check_response(self, method: str, template: str, status: int, body: Any, *, scores_body: str = "list") -> None:
        """Validate one answer of the operation ``method template`` (``scores_body="single"``: a server
        before 4.59, whose ``POST /scores`` answers the file's 200 ``{id}``)."""
        what = f"{method} {template} → {status}"
        if status >= 400:
            if not isinstance(body, dict) or not isinstance(body.get("message"), str):
                raise ContractViolation(f"{what}: an error answer is a JSON object with a string 'message'")
            return
        models = PACKAGE_MODELS.get((method, template))
        older = scores_body == "single" and status in FILE_STATUSES.get((method, template), set())
        if models is not None and not older:
            model = models.get(status)
            if model is None:
                raise ContractViolation(f"{what}: the langfuse package expects status {sorted(models)}")
            try:
                parse_obj_as(model, body)
            except pydantic.ValidationError as error:
                raise ContractViolation(f"{what}: rejected by langfuse {model.__name__}: {error}") from None
            return
        operation = self.api.operation_by_template(method, template)
        responses = operation.spec.get("responses", {})
        if str(status) not in responses:
            raise ContractViolation(f"{what}: status not in the OpenAPI operation ({sorted(responses)})")
        schema_pointer = f"{operation.pointer}/responses/{status}/content/application~1json/schema"
        self.api.validate(schema_pointer, body, what)

"""The contract the Langfuse adapter's tests keep: every request and every answer, checked.

- A request must be an operation of :data:`standins.contract.operations.OPERATIONS`: its query parameters
  known, typed, given once unless repeatable, the required ones present, ``filter`` a structured filter;
  its JSON body the operation's. ``POST /api/public/scores`` takes one object on servers before 4.59 and a
  non-empty *list* on newer ones (the ``langfuse`` 5.x package), each a ``CreateScoreRequest``.
  ``check_request``'s ``scores_body`` says which: "list" (the default, the package's contract), "single",
  or "any" (the stand-in: which shape a server accepts is the server's business — it answers the other with
  Langfuse's 400 — not a contract violation).
- Answers of v4 operations must be accepted by the ``langfuse`` package's own pydantic models; answers of
  the legacy routes, which the package no longer models, by ours (:mod:`standins.contract.legacy`).
- Error answers (4xx/5xx) are JSON objects with a string ``message``, as Langfuse sends them.
"""

from __future__ import annotations

import json
import typing
from datetime import datetime
from functools import cache
from typing import Any

import httpx
import pydantic
from langfuse.api.core.pydantic_utilities import parse_obj_as
from langfuse.api.core.serialization import FieldMetadata, convert_and_respect_annotation_metadata

from standins.contract.legacy import IngestionBatch, Shape, is_rfc3339
from standins.contract.operations import (
    LEVELS,
    RESOURCE_SPAN,
    SCORE_ELEMENT,
    SCORE_EVENT_BODY,
    Body,
    ContractViolation,
    Kind,
    Match,
    Operation,
    Param,
    Routes,
)


def _describe(error: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'/'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in error.errors(include_url=False)[:5]
    )


def _package_datetimes(model: Any, raw: Any, what: str) -> None:
    """The package's models read times leniently (a naive time, a number): a time at the top level of a
    package-modelled body must be RFC 3339 with an offset, as Langfuse writes and reads it."""
    if not isinstance(raw, dict) or not isinstance(model, type) or not issubclass(model, pydantic.BaseModel):
        return
    for name, info in model.model_fields.items():
        if datetime not in (info.annotation, *typing.get_args(info.annotation)):
            continue
        alias = next((m.alias for m in info.metadata if isinstance(m, FieldMetadata) and m.alias), name)
        value = raw.get(alias)
        if value is not None and not (isinstance(value, str) and is_rfc3339(value)):
            raise ContractViolation(f"{what}: {alias}: {value!r} is not a date-time with an offset")


@cache
def _adapter(model: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(model)


def check_package_model(model: Any, value: Any, what: str, *, strict: bool = False) -> None:
    """``value`` as the ``langfuse`` package reads it into ``model`` (its own aliases and rules); ``strict``
    (what the worker sends): JSON types exact, as Langfuse's own validation takes them — the package
    alone would read ``"1"`` as a number."""
    try:
        if strict:
            fields = convert_and_respect_annotation_metadata(object_=value, annotation=model, direction="read")
            _adapter(model).validate_json(json.dumps(fields), strict=True)
        else:
            parse_obj_as(model, value)
    except pydantic.ValidationError as error:
        raise ContractViolation(f"{what}: rejected by langfuse {model.__name__}: {_describe(error)}") from None
    _package_datetimes(model, value, what)


def check_own_model(model: type[pydantic.BaseModel], value: Any, what: str) -> None:
    """``value`` against one of our models of the legacy shapes."""
    try:
        model.model_validate(value)
    except pydantic.ValidationError as error:
        raise ContractViolation(f"{what}: rejected by {model.__name__}: {_describe(error)}") from None


def _check_query_value(name: str, param: Param, value: str, what: str) -> None:
    kind = param.kind
    if kind is Kind.INTEGER:
        ok = value.lstrip("-").isdigit()
    elif kind is Kind.NUMBER:
        try:
            float(value)
            ok = True
        except ValueError:
            ok = False
    elif kind is Kind.BOOLEAN:
        ok = value in ("true", "false")
    elif kind is Kind.DATETIME:
        ok = is_rfc3339(value)
    elif kind is Kind.LEVEL:
        ok = value in LEVELS
    else:
        ok = True
    if not ok:
        raise ContractViolation(f"{what}: query {name}={value!r} is not {kind.value}")


def check_filter_json(text: str, what: str) -> None:
    """The structured ``filter`` parameter: a JSON array of ``{type, column, operator, value?, key?}``."""
    try:
        conditions = json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractViolation(f"{what}: filter is not JSON: {error}") from None
    if not isinstance(conditions, list):
        raise ContractViolation(f"{what}: filter must be a JSON array")
    for condition in conditions:
        if not isinstance(condition, dict):
            raise ContractViolation(f"{what}: filter condition {condition!r} is not an object")
        for key in ("type", "column", "operator"):
            if not isinstance(condition.get(key), str):
                raise ContractViolation(f"{what}: filter condition {condition} needs a string {key!r}")
        if condition["type"] != "null" and "value" not in condition:
            raise ContractViolation(f"{what}: filter condition {condition} needs a value")
        if condition["type"] in ("stringObject", "numberObject") and not condition.get("key"):
            raise ContractViolation(f"{what}: filter condition {condition} needs a key")


class Contract:
    def __init__(self, routes: Routes | None = None) -> None:
        self.routes = routes or Routes()

    def operation(self, method: str, raw_path: str) -> Match:
        """The operation a request is for (``ContractViolation`` when there is none)."""
        return self.routes.match(method, raw_path)

    # --- requests ----------------------------------------------------------------------------

    def check_request(self, method: str, url: httpx.URL | str, body: Any = None, *, scores_body: str = "list") -> str:
        """Validate one request; returns the operation's path template."""
        url = httpx.URL(url) if isinstance(url, str) else url
        raw_path = url.raw_path.decode("ascii").split("?", 1)[0]  # percent-encoded: "/" in an id stays one segment
        operation = self.routes.match(method, raw_path).operation
        what = f"{operation.method} {url.path}"
        values: dict[str, list[str]] = {}
        for name, value in url.params.multi_items():
            values.setdefault(name, []).append(value)
        for name, items in values.items():
            param = operation.query.get(name)
            if param is None:
                raise ContractViolation(f"{what}: query parameter {name!r} is not a parameter of the operation")
            if len(items) > 1 and not param.repeated:
                raise ContractViolation(f"{what}: query parameter {name!r} given {len(items)} times")
            for item in items:
                _check_query_value(name, param, item, what)
            if name == "filter":
                check_filter_json(items[0], what)
        for name, param in operation.query.items():
            if param.required and name not in values:
                raise ContractViolation(f"{what}: required query parameter {name!r} missing")
        self._check_body(operation, body, what, scores_body)
        return operation.path

    def _check_body(self, operation: Operation, body: Any, what: str, scores_body: str) -> None:
        if operation.body is None:
            if body is not None:
                raise ContractViolation(f"{what}: the operation takes no body")
            return
        if body is None:
            raise ContractViolation(f"{what}: body required")
        if operation.body is Body.MODEL:
            check_package_model(operation.body_model, body, f"{what}: body", strict=True)
        elif operation.body is Body.SCORES:
            if scores_body == "single" and not isinstance(body, dict):
                raise ContractViolation(f"{what}: body must be one JSON object (servers before 4.59)")
            if scores_body in ("single", "any") and isinstance(body, dict):
                check_package_model(SCORE_ELEMENT, body, f"{what}: body", strict=True)
                return
            if not isinstance(body, list) or not body:
                raise ContractViolation(f"{what}: body must be a non-empty JSON list")
            for index, item in enumerate(body):
                check_package_model(SCORE_ELEMENT, item, f"{what}: body[{index}]", strict=True)
        elif operation.body is Body.INGESTION:
            check_own_model(IngestionBatch, body, f"{what}: body")
            for index, event in enumerate(body["batch"]):
                if event["type"] == "score-create":
                    check_package_model(SCORE_EVENT_BODY, event["body"], f"{what}: batch[{index}].body", strict=True)
        else:  # OTLP/JSON, read as leniently as the package does (protobuf's JSON writes 64-bit integers as text)
            spans = body.get("resourceSpans") if isinstance(body, dict) else None
            if not isinstance(spans, list):
                raise ContractViolation(f"{what}: body: resourceSpans: a list is required")
            for index, span in enumerate(spans):
                check_package_model(RESOURCE_SPAN, span, f"{what}: resourceSpans[{index}]")

    # --- answers -----------------------------------------------------------------------------

    def check_response(self, method: str, template: str, status: int, body: Any, *, scores_body: str = "list") -> None:
        """Validate one answer of the operation ``method template`` (``scores_body="single"``: a server
        before 4.59, whose ``POST /scores`` answers 200 ``{id}``)."""
        what = f"{method} {template} → {status}"
        if status >= 400:
            if not isinstance(body, dict) or not isinstance(body.get("message"), str):
                raise ContractViolation(f"{what}: an error answer is a JSON object with a string 'message'")
            return
        operation = self.routes.by_template(method, template)
        answers = dict(operation.answers)
        if scores_body == "single":
            answers.update(operation.single_answers)
        model = answers.get(status)
        if model is None:
            raise ContractViolation(f"{what}: status is not an answer of this operation (expected {sorted(answers)})")
        if isinstance(model, type) and issubclass(model, Shape):
            check_own_model(model, body, what)
        else:
            check_package_model(model, body, what)

"""Langfuse's OpenAPI file as JSON Schema: find the operation of a request, validate it and its answer.

The file is OpenAPI 3.0: ``nullable: true`` is not JSON Schema, and a ``$ref`` with siblings means
"this, or null". Both are rewritten to JSON Schema 2020-12 before validation; ``$ref``\\ s resolve inside
the whole document (a ``referencing`` registry), so any schema of the file can be validated by pointer.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import yaml
from referencing import Registry
from referencing.jsonschema import DRAFT202012

#: Where CI keeps the file: ``shared/`` beside the repository clone.
RELATIVE_PATH = Path("..") / "shared" / "reference" / "langfuse-openapi.yml"
ENV_VAR = "LANGFUSE_OPENAPI"
FALLBACK_PATH = Path("/work/shared/reference/langfuse-openapi.yml")
REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URI = "urn:langfuse-openapi"


class ContractViolation(AssertionError):
    """A request or answer that does not keep Langfuse's contract."""


def locate_openapi() -> Path:
    """``$LANGFUSE_OPENAPI``, else ``../shared/reference/…`` beside the repo, else the shared fallback."""
    candidates = []
    if os.environ.get(ENV_VAR):
        candidates.append(Path(os.environ[ENV_VAR]))
    candidates += [(REPO_ROOT / RELATIVE_PATH).resolve(), FALLBACK_PATH]
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(f"langfuse-openapi.yml not found (tried {tried}); set {ENV_VAR}")


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema → JSON Schema: ``nullable`` becomes a null alternative, recursively."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    nullable = node.get("nullable") is True
    converted = {key: to_json_schema(value) for key, value in node.items() if key != "nullable"}
    if "$ref" in converted and len(converted) > 1:
        # OpenAPI 3.0 ignores siblings of $ref; the file uses them to say "nullable reference".
        converted = {"$ref": converted["$ref"]}
    if not nullable:
        return converted
    if "$ref" in converted or any(k in converted for k in ("oneOf", "anyOf", "allOf")):
        return {"anyOf": [converted, {"type": "null"}]}
    if isinstance(converted.get("type"), str):
        converted["type"] = [converted["type"], "null"]
    if "enum" in converted and None not in converted["enum"]:
        converted["enum"] = [*converted["enum"], None]
    return converted


def _date_time(value: object) -> bool:
    """RFC 3339 date-time with an offset (jsonschema only checks it with an optional extra installed)."""
    if not isinstance(value, str):
        return True
    if "T" not in value and "t" not in value:
        return False
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None


FORMATS = jsonschema.FormatChecker()
FORMATS.checks("date-time")(_date_time)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    spec: Mapping[str, Any]
    pointer: str
    path_params: Mapping[str, str]


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class OpenApi:
    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = to_json_schema(document)
        resource = DRAFT202012.create_resource(self.document)
        self._registry: Registry[Any] = Registry().with_resource(BASE_URI, resource)
        self._templates: list[tuple[re.Pattern[str], str, int]] = []
        for template in self.document["paths"]:
            pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            self._templates.append((re.compile(pattern), template, template.count("{")))
        self._templates.sort(key=lambda t: t[2])

    def validator(self, pointer: str) -> jsonschema.protocols.Validator:
        return _validator(self, pointer)

    def validate(self, pointer: str, value: Any, what: str) -> None:
        errors = sorted(self.validator(pointer).iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            details = "; ".join(
                f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:5]
            )
            raise ContractViolation(f"{what}: {details}")

    def operation_by_template(self, method: str, template: str) -> Operation:
        spec = self.document["paths"].get(template, {}).get(method.lower())
        if spec is None:
            raise ContractViolation(f"{method.upper()} {template}: no such operation in the OpenAPI file")
        return Operation(method.upper(), template, spec, f"/paths/{_escape(template)}/{method.lower()}", {})

    def operation(self, method: str, path: str) -> Operation:
        method = method.lower()
        for pattern, template, _ in self._templates:
            match = pattern.match(path)
            if match and method in self.document["paths"][template]:
                spec = self.document["paths"][template][method]
                pointer = f"/paths/{_escape(template)}/{method}"
                params = {k: unquote(v) for k, v in match.groupdict().items()}
                return Operation(method.upper(), template, spec, pointer, params)
        raise ContractViolation(f"{method.upper()} {path}: no such operation in the OpenAPI file")


@cache
def _validator(api: OpenApi, pointer: str) -> jsonschema.protocols.Validator:
    schema = {"$ref": f"{BASE_URI}#{pointer}"}
    return jsonschema.Draft202012Validator(schema, registry=api._registry, format_checker=FORMATS)


@cache
def load_openapi(path: Path | None = None) -> OpenApi:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with (path or locate_openapi()).open("rb") as handle:
        return OpenApi(yaml.load(handle, Loader=loader))


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

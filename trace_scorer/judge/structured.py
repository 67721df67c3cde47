"""Asking for JSON and checking it: the request fields per structured-output mode, and validation of the answer.

Servers differ in how they take a schema (docs/judges.md, "Structured output"): OpenAI's ``json_schema``
``response_format``; llama.cpp's servers ``{"type": "json_object", "schema": …}``; vLLM's
``structured_outputs``; Ollama's ``format``; a forced tool call; plain JSON mode; or the prompt alone.
:data:`MODES` is the order a model steps down in when its endpoint rejects a mode's parameter.

An answer is either a value that validates against the pydantic schema or an :class:`AnswerRejected`
with a message the model can act on (it is sent back when the judge asks again). Nothing is guessed:
text that is not the requested JSON is never turned into a verdict.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from trace_scorer.config.common import errors_in_one_line
from trace_scorer.config.judge import StructuredOutput
from trace_scorer.data import jsonbytes

T = TypeVar("T", bound=BaseModel)

#: Every mode, strongest first: the step-down order. A schema-enforcing mode comes before JSON mode, and
#: the prompt alone (parse and repair by asking again) is the last resort.
MODES: tuple[StructuredOutput, ...] = (
    "json_schema",
    "json_object_schema",
    "vllm_structured",
    "ollama_format",
    "tools",
    "json_object",
    "none",
)

#: Each mode's fallback when an endpoint rejects it.
STEP_DOWN: dict[StructuredOutput, StructuredOutput | None] = {
    mode: MODES[i + 1] if i + 1 < len(MODES) else None for i, mode in enumerate(MODES)
}

#: Words in an error body that name a mode's parameter: an answer naming them rejects the mode.
REJECTION_WORDS: dict[StructuredOutput, tuple[str, ...]] = {
    "json_schema": ("response_format", "json_schema", "structured output"),
    "json_object_schema": ("response_format", "json_object", "schema"),
    "vllm_structured": ("structured_outputs", "structured output"),
    "ollama_format": ("format",),
    "tools": ("tools", "tool_choice", "function"),
    "json_object": ("response_format", "json_object"),
    "none": (),
}


class AnswerRejected(Exception):
    """The model's text is not valid JSON for the schema; the message says why, for the retry prompt."""


def schema_name(schema: type[BaseModel]) -> str:
    return schema.__name__


@lru_cache(maxsize=64)
def strict_json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The schema in the form OpenAI's strict structured output accepts: closed objects, all required.

    Cached per schema class (it is built for every request otherwise); callers must not mutate it.
    """
    result = schema.model_json_schema()

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(result)
    return result


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by its definition and ``$defs`` dropped: the form every
    grammar converter takes (llama.cpp's and Ollama's handle ``$ref`` unevenly). The judge's schemas are
    not recursive."""
    defs = schema.get("$defs") or {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result


def request_fields(mode: StructuredOutput, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The chat request's fields that ask for ``schema`` (a closed JSON schema named ``name``) in ``mode``."""
    if mode == "json_schema":
        spec = {"name": name, "schema": schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    if mode == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "vllm_structured":
        return {"structured_outputs": {"json": schema}}
    if mode == "ollama_format":
        return {"format": schema}
    if mode == "tools":
        function = {"name": name, "description": "Give the answer in this format.", "parameters": schema}
        return {
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": name}},
        }
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def response_format(mode: StructuredOutput, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` request parameter for ``mode`` (None: the mode sends none); requests are
    built by :func:`request_fields`. For tests and benches only."""
    fields = request_fields(mode, schema_name(schema), strict_json_schema(schema))
    fmt: dict[str, Any] | None = fields.get("response_format")
    return fmt


_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def extract_json_text(text: str) -> str:
    """The JSON object in ``text``: as is, inside a Markdown fence, or between the first ``{`` and last ``}``.

    Without structured output some models wrap JSON in a fence or a sentence; unwrapping is not guessing,
    the object still has to validate in full.
    """
    stripped = text.strip()
    if match := _FENCE.match(stripped):
        stripped = match.group(1).strip()
    if stripped.startswith("{"):
        return stripped
    start, end = stripped.find("{"), stripped.rfind("}")
    if start == -1 or end < start:
        raise AnswerRejected("the answer contains no JSON object")
    return stripped[start : end + 1]


def parse_answer(text: str | None, schema: type[T], context: dict[str, Any] | None = None) -> T:
    """Validate the model's text against ``schema`` (``context`` reaches the schema's validators)."""
    if text is None or not text.strip():
        raise AnswerRejected("the answer was empty")
    candidate = extract_json_text(text)
    try:
        # The usual answer, strict JSON that validates, read once: pydantic's parser accepts no text that
        # ``json.loads`` refuses, so it is the value the path below gives (that path parsed every answer
        # twice, ~1 % of the worker's CPU). Anything it refuses takes that path from the start.
        return schema.model_validate_json(candidate, context=context)
    except ValidationError:
        pass
    try:
        jsonbytes.loads(candidate)  # json.loads's verdict (its error when both refuse), by orjson when it can
    except json.JSONDecodeError:
        # A raw control character (a line break, a tab) inside a string: JSON forbids it, but grammar-
        # constrained servers write it — llama-cpp-python 0.3.36 turns a schema's "string" into
        # ``char ::= [^"\\] | …``, which lets the model emit one (SmolLM2-135M does, now and then), and
        # asking again gets the same. The object is unambiguous: it is read as written, then re-encoded
        # so the schema validates exactly what a strict answer would give.
        try:
            candidate = json.dumps(json.loads(candidate, strict=False), ensure_ascii=False)
        except json.JSONDecodeError as exc:
            raise AnswerRejected(f"the answer is not valid JSON ({exc.msg} at position {exc.pos})") from None
    try:
        return schema.model_validate_json(candidate, context=context)
    except ValidationError as exc:
        problems = errors_in_one_line(exc, root="(root)", as_raised=True)
        raise AnswerRejected(f"the JSON does not match the required format: {problems}") from None

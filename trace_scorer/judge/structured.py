"""Asking for JSON and checking it: the ``response_format`` per mode, and validation of the answer.

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

from trace_scorer.config.judge import StructuredOutput

T = TypeVar("T", bound=BaseModel)

#: Each mode's fallback when an endpoint rejects it.
STEP_DOWN: dict[StructuredOutput, StructuredOutput | None] = {
    "json_schema": "json_object",
    "json_object": "none",
    "none": None,
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


def response_format(mode: StructuredOutput, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` request parameter for ``mode`` (None: do not send the parameter)."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema_name(schema),
                "schema": strict_json_schema(schema),
                "strict": True,
            },
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


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


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "(root)"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def parse_answer(text: str | None, schema: type[T], context: dict[str, Any] | None = None) -> T:
    """Validate the model's text against ``schema`` (``context`` reaches the schema's validators)."""
    if text is None or not text.strip():
        raise AnswerRejected("the answer was empty")
    candidate = extract_json_text(text)
    try:
        json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise AnswerRejected(f"the answer is not valid JSON ({exc.msg} at position {exc.pos})") from None
    try:
        return schema.model_validate_json(candidate, context=context)
    except ValidationError as exc:
        raise AnswerRejected(f"the JSON does not match the required format: {_describe(exc)}") from None

"""Tool-call arguments as a dict, whatever shape they arrive in.

Models emit arguments as JSON strings (OpenAI, Responses), as objects (LangChain ``args``, Anthropic
``input``, OTel parts), and sometimes as something else: truncated JSON, a bare string for a
single-input tool, a Python ``repr`` (old LangChain ``input_str``). A call is never dropped for its
arguments: what cannot be read as an object is kept, unparsed, under ``"_raw"`` and noted, so the
call still counts (the model did call that tool) and the user sees why its arguments did not match.
"""

from __future__ import annotations

import ast
from typing import Any

from trace_scorer.data import jsonbytes
from trace_scorer.extract.model import RAW_ARGUMENTS_KEY, Notes, short

#: Longest string we try to read as a Python literal (ast is linear but not free).
_MAX_LITERAL = 20_000


def read_arguments(value: Any, *, tool: str, notes: Notes) -> dict[str, Any]:
    """Arguments as a dict; unreadable ones under ``"_raw"``, with a note naming the tool."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return string_keys(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        try:
            parsed = jsonbytes.loads(text)
        except (ValueError, RecursionError):
            parsed = _python_literal(text)
            if isinstance(parsed, dict) and all(isinstance(key, str) for key in parsed):
                return parsed
            notes.add(f"arguments of tool '{tool}' are not valid JSON ({short(text)}); kept under '_raw'")
            return {RAW_ARGUMENTS_KEY: value}
        if isinstance(parsed, dict):
            return parsed
        if parsed is None:
            return {}
        notes.add(f"arguments of tool '{tool}' are not a JSON object ({short(text)}); kept under '_raw'")
        return {RAW_ARGUMENTS_KEY: value}
    notes.add(f"arguments of tool '{tool}' are not an object ({short(value)}); kept under '_raw'")
    return {RAW_ARGUMENTS_KEY: value}


def string_keys(value: dict[Any, Any]) -> dict[str, Any]:
    """Argument names are strings (JSON objects always are; Python callers may pass others)."""
    if all(isinstance(key, str) for key in value):
        return value
    return {str(key): item for key, item in value.items()}


def _python_literal(text: str) -> Any:
    """``"{'city': 'Paris'}"`` (a Python repr) → dict; anything else → None. Never evaluates code."""
    if not (text.startswith("{") and text.endswith("}")) or len(text) > _MAX_LITERAL:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None

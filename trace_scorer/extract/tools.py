"""TOOL observations → calls: name = the observation's name, input = arguments, output = result.

This is how LangChain tool runs, OTel ``execute_tool`` spans and ``@observe(as_type="tool")`` functions
appear. Inputs come as an argument object, as a JSON string, as ``{"args": [...], "kwargs": {...}}``
(the ``@observe`` decorator's capture of a Python call), or as a bare string (a single-input LangChain
tool); outputs as the result itself or a serialized LangChain ``ToolMessage``. The call id, when known,
comes from that ``ToolMessage``'s ``tool_call_id``, or from the metadata (``tool_call_id``, the OTel
``gen_ai.tool.call.id`` attribute).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.arguments import read_arguments, string_keys
from trace_scorer.extract.formats import installed_formats
from trace_scorer.extract.model import RAW_ARGUMENTS_KEY, Call, Notes
from trace_scorer.extract.rows import Observation

_DECORATOR_KEYS = frozenset({"args", "kwargs"})


def read_tool_observation(observation: Observation, notes: Notes) -> Call | None:
    """The call a TOOL observation records, or None (noted) when it has no name."""
    name = observation.name
    if name:  # a span name such as OTel's "execute_tool <tool>", when the tool name attribute was not kept
        name = next((found for fmt in installed_formats() if (found := fmt.tool_name(name)) is not None), name)
    if not name:
        notes.add(f"{observation.label()}: a TOOL observation without a name; not counted as a call")
        return None
    arguments = _arguments(observation.input, name, notes)
    result = observation.output
    call_id = None
    for fmt in installed_formats():  # an output in a format's envelope (a serialized LangChain ToolMessage)
        unwrapped = fmt.tool_output(result)
        if unwrapped is not None:
            result, call_id = unwrapped
            break
    if call_id is None:
        call_id = _metadata_call_id(observation.metadata)
    error = output_error(observation.output)
    if observation.level == "ERROR":
        error = observation.status_message or error or "the TOOL observation's level is ERROR"
        if result is None and observation.status_message:
            result = observation.status_message
    return Call(name=name, arguments=arguments, id=call_id, result=result, error=error)


def output_error(output: Any) -> str | None:
    """Why a tool's output says it failed, or None: a LangChain ``ToolMessage`` with ``status: "error"``,
    an MCP/Anthropic result flagged ``isError``/``is_error``, an object whose only key is ``error``, or
    a text that starts with ``Error:`` (what LangChain's ``handle_tool_error`` returns to the model)."""
    if isinstance(output, Mapping):
        if output.get("status") == "error" or output.get("isError") is True or output.get("is_error") is True:
            return _error_text(output.get("content", output.get("error"))) or "the tool reported an error"
        if output.keys() == {"error"} and output["error"]:
            return _error_text(output["error"]) or "the tool reported an error"
        return None
    if isinstance(output, str) and output[:6].lower() == "error:":
        return output[:200]
    return None


def _error_text(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value[:200]
    if isinstance(value, Mapping) and isinstance(value.get("message"), str):
        return str(value["message"])[:200]
    return None


def _arguments(value: Any, tool: str, notes: Notes) -> dict[str, Any]:
    if isinstance(value, dict) and value and value.keys() <= _DECORATOR_KEYS:
        positional = value.get("args")
        keywords = value.get("kwargs")
        if isinstance(keywords, dict) or keywords is None:
            arguments = string_keys(dict(keywords or {}))
            if positional:
                notes.add(f"tool '{tool}' was called with positional arguments; kept under '_raw'")
                arguments[RAW_ARGUMENTS_KEY] = positional
            return arguments
    return read_arguments(value, tool=tool, notes=notes)


def _metadata_call_id(metadata: Mapping[str, Any]) -> str | None:
    value = metadata.get("tool_call_id")
    if isinstance(value, str) and value:
        return value
    for fmt in installed_formats():  # a format's attribute (OTel's gen_ai.tool.call.id)
        value = fmt.tool_call_id(metadata)
        if value is not None:
            return value
    return None

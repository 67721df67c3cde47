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
    if observation.level == "ERROR" and result is None and observation.status_message:
        result = observation.status_message
    return Call(name=name, arguments=arguments, id=call_id, result=result)


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

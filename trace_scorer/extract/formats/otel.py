"""OpenTelemetry GenAI semantic conventions: message ``parts`` and ``execute_tool`` spans.

```json
[{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather",
                                  "arguments": {"city": "Paris"}}], "finish_reason": "tool_call"}]
[{"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18°C"}]}]
```
An ``execute_tool`` span arrives as a TOOL observation (name = tool, input = arguments, output =
result); its call id, when the instrumentation recorded it, is the ``gen_ai.tool.call.id`` attribute.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.formats.base import Format
from trace_scorer.extract.model import Content, Notes
from trace_scorer.extract.toolcalls import read_tool_call

CALL_ID_ATTRIBUTE = "gen_ai.tool.call.id"
#: The semconv name of an ``execute_tool`` span, kept when the tool name attribute was not.
TOOL_SPAN_PREFIX = "execute_tool "


def tool_call(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call = read_tool_call(block, notes, where=where)
    if call is not None:
        content.calls.append(call)


def tool_call_response(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call_id = block.get("id")
    result = block.get("response", block.get("result"))
    content.results.append((call_id if isinstance(call_id, str) else None, result))


def call_id_from_metadata(metadata: Mapping[str, Any]) -> str | None:
    """``gen_ai.tool.call.id`` from the observation metadata, flat or under ``attributes``."""
    value = metadata.get(CALL_ID_ATTRIBUTE)
    if value is None:
        attributes = metadata.get("attributes")
        if isinstance(attributes, str):
            try:
                attributes = json.loads(attributes)
            except (ValueError, RecursionError):
                attributes = None
        if isinstance(attributes, dict):
            value = attributes.get(CALL_ID_ATTRIBUTE)
    return value if isinstance(value, str) and value else None


BLOCKS = {"tool_call": tool_call, "tool_call_response": tool_call_response}

#: Parts with nothing we score.
SKIPPED_BLOCKS = frozenset({"blob", "uri", "reasoning"})


def tool_span_name(name: str) -> str | None:
    """``execute_tool get_weather`` → ``get_weather`` (the span name itself when nothing follows)."""
    if name.startswith(TOOL_SPAN_PREFIX):
        return name[len(TOOL_SPAN_PREFIX) :].strip() or name
    return None


class OTel(Format):
    """OpenTelemetry GenAI semconv: ``tool_call`` / ``tool_call_response`` parts, ``execute_tool`` spans
    and their ``gen_ai.tool.call.id``."""

    name = "otel"
    blocks = BLOCKS
    skipped_blocks = SKIPPED_BLOCKS

    def tool_name(self, name: str) -> str | None:
        return tool_span_name(name)

    def tool_call_id(self, metadata: Mapping[str, Any]) -> str | None:
        return call_id_from_metadata(metadata)


OTEL = OTel()

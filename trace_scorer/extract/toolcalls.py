"""One tool call from any of the shapes providers and frameworks write.

| shape                      | name            | arguments                  | id                 |
|----------------------------|-----------------|----------------------------|--------------------|
| OpenAI chat ``tool_calls`` | function.name   | function.arguments (JSON)  | id                 |
| Responses ``function_call``| name            | arguments (JSON)           | call_id (not id)   |
| LangChain ``tool_calls``   | name            | args (object)              | id                 |
| Anthropic ``tool_use``     | name            | input (object)             | id                 |
| OTel GenAI ``tool_call``   | name            | arguments                  | id                 |
| Vercel AI SDK ``tool-call``| toolName        | args / input               | toolCallId         |
| seed / sample files        | name, tool_name | arguments, parameters      | id                 |
"""

from __future__ import annotations

from typing import Any

from trace_scorer.extract.arguments import read_arguments
from trace_scorer.extract.model import Call, Notes, short

_ARGUMENT_KEYS = ("arguments", "args", "input", "parameters")
_ID_KEYS = ("call_id", "toolCallId", "tool_call_id", "id")


def read_tool_call(value: Any, notes: Notes, *, where: str) -> Call | None:
    """A :class:`Call`, or None (with a note) when the value names no tool."""
    if not isinstance(value, dict):
        notes.add(f"{where}: a tool call is not an object ({short(value)}); skipped")
        return None
    function = value.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        raw_arguments = function.get("arguments")
    else:
        name = value.get("name")
        if name is None:
            name = value.get("toolName", value.get("tool_name"))
        raw_arguments = None
        for key in _ARGUMENT_KEYS:
            if key in value:
                raw_arguments = value[key]
                break
    if not isinstance(name, str) or not name:
        notes.add(f"{where}: a tool call has no name ({short(value)}); skipped")
        return None
    call_id = None
    for key in _ID_KEYS:
        candidate = value.get(key)
        if candidate is None:  # most keys: absent
            continue
        if isinstance(candidate, str) and candidate:
            call_id = candidate
            break
        if isinstance(candidate, int) and not isinstance(candidate, bool):
            call_id = str(candidate)
            break
    arguments = read_arguments(raw_arguments, tool=name, notes=notes)
    return Call(name=name, arguments=arguments, id=call_id, result=value.get("result"))


def read_tool_calls(value: Any, notes: Notes, *, where: str) -> list[Call]:
    """A list of calls (skipping unreadable entries, each noted)."""
    if not isinstance(value, list):
        if value is not None:
            notes.add(f"{where}: tool calls are not a list ({short(value)}); skipped")
        return []
    calls = []
    for item in value:
        call = read_tool_call(item, notes, where=where)
        if call is not None:
            calls.append(call)
    return calls

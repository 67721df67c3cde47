"""LangChain / LangGraph messages as the Langfuse CallbackHandler records them.

Assistant messages carry LangChain ``tool_calls`` (``args`` is an object), often also the provider's
raw calls in ``additional_kwargs.tool_calls``, and ``invalid_tool_calls`` when the model's JSON did not
parse. The handler *appends the tool definitions to the input* as ``{"role": "tool", "content":
{"type": "function", "function": {...}}}`` messages: those are not tool results and are dropped.
LangGraph state dumps use ``type`` (``human``/``ai``/``tool``) instead of ``role``; ``dumpd`` output
(``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``) and ``("user", "hi")``
pairs are read too. A TOOL observation's output may be a serialized ``ToolMessage``: its ``content`` is
the result and its ``tool_call_id`` ties it to the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.data.rows import json_in_text
from trace_scorer.extract.formats.base import Format
from trace_scorer.extract.model import Call, Notes, Role
from trace_scorer.extract.toolcalls import read_tool_call

ROLE_BY_TYPE = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
    "humanmessagechunk": "user",
    "aimessagechunk": "assistant",
    "systemmessagechunk": "system",
    "toolmessagechunk": "tool",
}
_CLASS_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": None,
}
#: LangChain's role names.
ROLES: dict[str, Role] = {"human": "user", "ai": "assistant"}
TUPLE_ROLES = frozenset({"user", "human", "ai", "assistant", "system", "tool", "developer"})


def unwrap(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ``dumpd`` constructor dict → its kwargs with a role; anything else unchanged."""
    if message.get("lc") == 1 and message.get("type") == "constructor":
        kwargs = message.get("kwargs")
        ident = message.get("id")
        if isinstance(kwargs, dict) and isinstance(ident, list) and ident:
            class_name = str(ident[-1]).removesuffix("Chunk")
            role = _CLASS_ROLES.get(class_name)
            if role is None:
                role = kwargs.get("role")
            return {**kwargs, "role": role} if role is not None else kwargs
    return message


def is_tool_definition(message: Mapping[str, Any]) -> bool:
    """The CallbackHandler's appended tool definitions: a ``tool`` message with no call id whose
    content is an object (``{"type": "function", "function": {...}}`` or a raw tool's attributes)."""
    content = message.get("content")
    if isinstance(content, str) and content.startswith("{"):
        content = json_in_text(content, "{")
        return isinstance(content, dict) and "function" in content
    return isinstance(content, dict)


def additional_kwargs_calls(message: Mapping[str, Any], notes: Notes, where: str) -> list[Call]:
    """The provider's raw calls kept in ``additional_kwargs`` (``tool_calls`` or ``function_call``)."""
    extra = message.get("additional_kwargs")
    if not isinstance(extra, dict):
        return []
    calls: list[Call] = []
    raw = extra.get("tool_calls")
    if isinstance(raw, list):
        for item in raw:
            call = read_tool_call(item, notes, where=where)
            if call is not None:
                calls.append(call)
    if extra.get("function_call") is not None:
        call = read_tool_call(extra["function_call"], notes, where=where)
        if call is not None:
            calls.append(call)
    return calls


def invalid_calls(message: Mapping[str, Any], notes: Notes, where: str) -> list[Call]:
    """``invalid_tool_calls``: the model called a tool but its arguments did not parse. The call
    counts; its raw arguments are kept under ``_raw`` (with a note)."""
    invalid = message.get("invalid_tool_calls")
    if not isinstance(invalid, list):
        return []
    calls = []
    for item in invalid:
        call = read_tool_call(item, notes, where=where)
        if call is not None:
            calls.append(call)
    return calls


def tool_message_output(output: Any) -> tuple[Any, str | None] | None:
    """A serialized ``ToolMessage`` (a TOOL observation's output) → (content, tool_call_id)."""
    if isinstance(output, dict) and output.get("type") == "tool" and "content" in output:
        call_id = output.get("tool_call_id")
        return output.get("content"), call_id if isinstance(call_id, str) and call_id else None
    return None


class LangChain(Format):
    """LangChain / LangGraph: ``dumpd`` envelopes, ``type`` instead of ``role``, ``(role, text)`` pairs,
    calls in ``additional_kwargs`` and ``invalid_tool_calls``, the appended tool definitions, and a
    serialized ``ToolMessage`` as a TOOL observation's output."""

    name = "langchain"
    roles = ROLES
    message_types = ROLE_BY_TYPE
    pair_roles = TUPLE_ROLES
    call_keys = frozenset({"additional_kwargs", "invalid_tool_calls"})

    def unwrap(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        return unwrap(message)

    def not_a_tool_result(self, message: Mapping[str, Any]) -> bool:
        return is_tool_definition(message)

    def message_calls(self, message: Mapping[str, Any], notes: Notes, where: str) -> list[list[Call]]:
        return [additional_kwargs_calls(message, notes, where), invalid_calls(message, notes, where)]

    def tool_output(self, output: Any) -> tuple[Any, str | None] | None:
        return tool_message_output(output)


LANGCHAIN = LangChain()

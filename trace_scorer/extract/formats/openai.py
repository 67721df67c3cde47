"""OpenAI: Chat Completions messages and the Responses API items.

Chat Completions (what the Langfuse OpenAI integration records; with tools the input is
``{"tools": [...], "messages": [...]}``, otherwise the bare list; the output is the assistant message):
```json
{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
  "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}
{"role": "tool", "tool_call_id": "call_1", "content": "18°C"}
```
Responses API (input: a string, an item list, or ``{"instructions", "input", "tools"}``; output: one
item or a list):
```json
{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\\"city\\":\\"Paris\\"}"}
{"type": "function_call_output", "call_id": "call_1", "output": "18°C"}
```
The legacy ``function_call`` / ``role: "function"`` pair is read too (calls without ids).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.model import Call, Msg, Notes
from trace_scorer.extract.toolcalls import read_tool_call
from trace_scorer.sample import content_text

#: Keys of a Responses request as the Langfuse integration records it.
RESPONSES_PROMPT_KEYS = frozenset({"instructions", "input", "tools", "tool_choice", "parallel_tool_calls"})

#: Items the model runs on OpenAI's side: real tool use, but with no name/arguments to compare.
BUILT_IN_ITEMS = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
SKIPPED_ITEMS = frozenset({"reasoning", "item_reference", "computer_call_output", "local_shell_call_output"})
RESPONSES_ITEMS = frozenset(
    {"function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", "mcp_call"}
    | BUILT_IN_ITEMS
    | SKIPPED_ITEMS
)


def legacy_function_call(message: Mapping[str, Any], notes: Notes, where: str) -> Call | None:
    """The pre-tools ``function_call: {name, arguments}`` of an assistant message."""
    value = message.get("function_call")
    if value is None:
        return None
    return read_tool_call(value, notes, where=where)


def first_choice_message(response: Mapping[str, Any]) -> Any:
    """A raw Chat Completions response: the message of its first choice."""
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0].get("message")
    return None


def is_responses_response(value: Mapping[str, Any]) -> bool:
    return value.get("object") == "response" and isinstance(value.get("output"), list)


def is_responses_prompt(value: Mapping[str, Any]) -> bool:
    return "input" in value and value.keys() <= RESPONSES_PROMPT_KEYS


def read_item(item: Mapping[str, Any], kind: str, notes: Notes, where: str) -> list[Msg]:
    """One Responses item that is not a message: a call, a call's output, or something skipped."""
    if kind in ("function_call", "custom_tool_call", "mcp_call"):
        call = read_tool_call(item, notes, where=where)
        if call is None:
            return []
        if kind == "mcp_call" and item.get("output") is not None:
            call.result = item.get("output")
        return [Msg(role="assistant", calls=[call])]
    if kind in ("function_call_output", "custom_tool_call_output"):
        call_id = item.get("call_id")
        output = item.get("output")
        return [
            Msg(
                role="tool",
                content=content_text(output),
                tool_call_id=call_id if isinstance(call_id, str) else None,
                result=output,
            )
        ]
    if kind in BUILT_IN_ITEMS:
        notes.add(f"{where}: built-in tool item '{kind}' has no name and arguments to compare; not counted")
    return []

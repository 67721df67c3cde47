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
The legacy ``function_call`` / ``role: "function"`` pair is read too (calls without ids; the message
reader reads ``function_call`` as part of the common message shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.formats.base import Format, Unpacked
from trace_scorer.extract.model import Msg, Notes, Role
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


#: Roles of Chat Completions besides the common ones.
ROLES: dict[str, Role] = {"developer": "system", "function": "tool"}
#: Text content parts (chat ``refusal`` parts, Responses ``input_text`` / ``output_text``).
TEXT_BLOCKS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
#: Media content parts: nothing we score.
SKIPPED_BLOCKS = frozenset({"image_url", "input_image", "input_audio", "audio", "file", "input_file"})


class OpenAI(Format):
    """Chat Completions and Responses: containers (a response with ``choices``, a Responses request
    or response), Responses items, roles and parts. The chat message itself (``role``, ``content``,
    ``tool_calls``, ``tool_call_id``, the legacy ``function_call``) is the shape every format shares:
    the message reader reads it."""

    name = "openai"
    roles = ROLES
    item_types = RESPONSES_ITEMS
    text_blocks = TEXT_BLOCKS
    skipped_blocks = SKIPPED_BLOCKS

    def unpack(self, container: Mapping[str, Any]) -> Unpacked | None:
        if "choices" in container:
            return Unpacked(first_choice_message(container))
        if is_responses_response(container):
            return Unpacked(container["output"])
        if is_responses_prompt(container):
            instructions = container.get("instructions")
            system = instructions if isinstance(instructions, str) else None
            return Unpacked(container.get("input"), system=system, side="input", required=False)
        return None

    def read_item(self, item: Mapping[str, Any], kind: str, notes: Notes, where: str) -> list[Msg]:
        return read_item(item, kind, notes, where)


OPENAI = OpenAI()

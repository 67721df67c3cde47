"""An observation's input or output → conversation messages, whatever format wrote it.

Formats are recognised per message and per content block rather than per trace: one trace often
mixes them (a LangChain agent on Anthropic writes LangChain messages holding ``tool_use`` blocks), so
every message goes through the same reader and each format module contributes what it knows.
The containers understood: a message list; ``{"messages": [...]}`` (OpenAI integration with tools,
LangGraph state, Anthropic request with ``system``); a Chat Completions response (``choices``); a
Responses request (``{"instructions", "input", ...}``) or response (``object: "response"``); one
message. A plain string is one message (``user`` on the input side, ``assistant`` on the output side).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from trace_scorer.extract.formats import aisdk, anthropic, gemini, langchain, openai, otel
from trace_scorer.extract.model import Call, Content, Msg, Notes, Role, short
from trace_scorer.extract.toolcalls import read_tool_calls
from trace_scorer.sample import content_text

Side = Literal["input", "output"]

ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
}

BlockHandler = Callable[[Mapping[str, Any], Content, Notes, str], None]
BLOCK_HANDLERS: dict[str, BlockHandler] = {**anthropic.BLOCKS, **otel.BLOCKS, **aisdk.BLOCKS}
#: Text blocks: type → the key holding the text (OTel text parts use "content").
TEXT_BLOCKS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}
#: Blocks that carry no text or calls we score (media, reasoning): skipped without a note.
IGNORED_BLOCKS = frozenset(
    {
        "image",
        "image_url",
        "input_image",
        "input_audio",
        "audio",
        "file",
        "input_file",
        "document",
        "thinking",
        "redacted_thinking",
        "reasoning",
        "blob",
        "uri",
        "media",
    }
)
#: Untyped media parts (Gemini ``inlineData``/``fileData``): skipped without a note.
_MEDIA_KEYS = frozenset({"inlineData", "inline_data", "fileData", "file_data", "thought", "executableCode"})
_MAX_DEPTH = 6
#: Message keys that may hold calls (besides content blocks).
_CALL_KEYS = frozenset(
    {"tool_calls", "toolCalls", "additional_kwargs", "invalid_tool_calls", "function_call"}
)


class MessageReader:
    """Reads messages into :class:`Msg`, writing what it cannot read into ``notes``."""

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        #: The last message list read on each side, raw and read: every generation repeats the
        #: previous one's history, so an item equal to the one at the same place is not read again
        #: (comparing dicts is far cheaper than reading them; long agents were quadratic in reading).
        self._previous: dict[str, list[tuple[dict[str, Any], list[Msg]]]] = {}

    def read(self, value: Any, side: Side, where: str, depth: int = 0) -> list[Msg] | None:
        """The messages in ``value``; None when it is not in any message shape we know."""
        if value is None:
            return []
        if isinstance(value, str):
            return [Msg(role="user" if side == "input" else "assistant", content=value)]
        if depth > _MAX_DEPTH:
            self.notes.add(f"{where}: messages nested too deeply; not read")
            return None
        if isinstance(value, list):
            return self._read_list(value, side, where, depth)
        if isinstance(value, dict):
            return self._read_container(value, side, where, depth)
        return None

    def _read_list(self, items: list[Any], side: Side, where: str, depth: int) -> list[Msg] | None:
        messages: list[Msg] = []
        unread = 0
        previous = self._previous.get(side, [])
        current: list[tuple[dict[str, Any], list[Msg]]] = []
        for index, item in enumerate(items):
            found: list[Msg] | None
            if isinstance(item, dict):
                if index < len(previous) and previous[index][0] == item:
                    found = [_copy(message) for message in previous[index][1]]
                else:
                    found = self.read_message(item, side, where)
                if found is not None:
                    current.append((item, [_copy(message) for message in found]))
            elif isinstance(item, list) and _is_role_pair(item):
                found = self.read_message({"role": item[0], "content": item[1]}, side, where)
            elif isinstance(item, list | str):
                found = self.read(item, side, where, depth + 1)
            else:
                found = None
            if found is None:
                unread += 1
            else:
                messages.extend(found)
        if len(current) == len(items):
            self._previous[side] = current
        if unread == len(items) and items:
            return None
        if unread:
            self.notes.add(f"{where}: {unread} of {len(items)} items are not messages; skipped")
        return messages

    def _read_container(
        self, value: Mapping[str, Any], side: Side, where: str, depth: int
    ) -> list[Msg] | None:
        inner = value.get("messages")
        if isinstance(inner, list):
            found = self.read(inner, side, where, depth + 1) or []
            system = anthropic.system_text(value.get("system"))
            if system is None:
                system = anthropic.system_text(value.get("instructions"))
            return [Msg(role="system", content=system), *found] if system else found
        if "choices" in value:
            message = openai.first_choice_message(value)
            return self.read(message, side, where, depth + 1) if message is not None else None
        if openai.is_responses_response(value):
            return self.read(value["output"], side, where, depth + 1)
        if openai.is_responses_prompt(value):
            prompt = self.read(value.get("input"), "input", where, depth + 1) or []
            instructions = value.get("instructions")
            if isinstance(instructions, str) and instructions:
                return [Msg(role="system", content=instructions), *prompt]
            return prompt
        return self.read_message(value, side, where)

    def read_message(self, raw: Mapping[str, Any], side: Side, where: str) -> list[Msg] | None:
        """One message (possibly several: Anthropic tool results become one tool message each)."""
        message = langchain.unwrap(raw)
        kind = message.get("type")
        role_value = message.get("role")
        if role_value is None and isinstance(kind, str):
            if kind in openai.RESPONSES_ITEMS:
                return openai.read_item(message, kind, self.notes, where)
            role_value = langchain.role_from_type(kind)
        if role_value is None:
            return None
        role = ROLES.get(role_value.lower()) if isinstance(role_value, str) else None
        if role is None:
            self.notes.add(f"{where}: message role {short(role_value)} not recognised; message skipped")
            return []
        tool_call_id = _call_id(message)
        if role == "tool" and tool_call_id is None and langchain.is_tool_definition(message):
            return []  # a tool definition the LangChain handler appended, not a tool result
        content = Content()
        if "content" in message:
            self._read_content(message["content"], content, where)
        if "parts" in message:
            self._read_content(message["parts"], content, where)
        calls = self._calls(message, content, where)
        out = [
            Msg(role="tool", content=_as_text(result), tool_call_id=call_id, result=result)
            for call_id, result in content.results
        ]
        text = content.text()
        if role == "tool":
            if text or not content.results:
                raw_content = message.get("content")
                # The result as given when it is a string or an object; text for a list of blocks.
                result = raw_content if isinstance(raw_content, str | dict) and not content.results else text
                out.append(Msg(role="tool", content=text, tool_call_id=tool_call_id, result=result))
        elif text or calls or not content.results:
            out.append(Msg(role=role, content=text, calls=calls))
        return out

    def _calls(self, message: Mapping[str, Any], content: Content, where: str) -> list[Call]:
        if _CALL_KEYS.isdisjoint(message):  # most messages: no calls outside the content blocks
            return content.calls
        notes = self.notes
        legacy = openai.legacy_function_call(message, notes, where)
        return _merge_sources(
            [
                read_tool_calls(message.get("tool_calls", message.get("toolCalls")), notes, where=where),
                langchain.additional_kwargs_calls(message, notes, where),
                langchain.invalid_calls(message, notes, where),
                [legacy] if legacy is not None else [],
                content.calls,
            ]
        )

    def _read_content(self, value: Any, content: Content, where: str) -> None:
        if value is None:
            return
        if isinstance(value, str):
            content.texts.append(value)
            return
        if not isinstance(value, list):
            content.texts.append(content_text(value))
            return
        for block in value:
            if isinstance(block, str):
                content.texts.append(block)
            elif isinstance(block, dict):
                self._read_block(block, content, where)

    def _read_block(self, block: Mapping[str, Any], content: Content, where: str) -> None:
        kind = block.get("type")
        if isinstance(kind, str):
            handler = BLOCK_HANDLERS.get(kind)
            if handler is not None:
                handler(block, content, self.notes, where)
                return
            if kind in IGNORED_BLOCKS:
                return
            key = TEXT_BLOCKS.get(kind)
            if key is None:
                self.notes.add(f"{where}: content block of type {short(kind)} not read")
                return
        else:
            for part_key, part_handler in gemini.KEYED_PARTS.items():
                if part_key in block:
                    part_handler(block, content, self.notes, where)
                    return
        text = block.get(key) if isinstance(kind, str) and key is not None else block.get("text")
        if not isinstance(text, str):
            text = block.get("content")
        if isinstance(text, str):
            content.texts.append(text)
        elif kind is None and not _MEDIA_KEYS.intersection(block):
            self.notes.add(f"{where}: a content block without type or text not read ({short(block)})")


def _copy(message: Msg) -> Msg:
    """A fresh message: calls get their order, id and result set later, per occurrence."""
    calls = [
        Call(name=c.name, arguments=c.arguments, id=c.id, result=c.result, order=c.order, _key=c._key)
        for c in message.calls
    ]
    return Msg(
        role=message.role,
        content=message.content,
        calls=calls,
        tool_call_id=message.tool_call_id,
        result=message.result,
        order=message.order,
        _key=message._key,
    )


def _is_role_pair(item: list[Any]) -> bool:
    return (
        len(item) == 2
        and isinstance(item[0], str)
        and item[0].lower() in langchain.TUPLE_ROLES
        and isinstance(item[1], str | list)
    )


def _call_id(message: Mapping[str, Any]) -> str | None:
    for key in ("tool_call_id", "toolCallId", "call_id"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _as_text(value: Any) -> str:
    return content_text(value)


def _merge_sources(sources: list[list[Call]]) -> list[Call]:
    """One message may list the same call in several places (``tool_calls`` and
    ``additional_kwargs``, or a content block): keep it once. Within one source every call counts
    (two identical parallel calls are two calls)."""
    merged: list[Call] = []
    ids: set[str] = set()
    keys: set[str] = set()
    keys_without_id: set[str] = set()
    for source in sources:
        if not source:
            continue
        if not merged:
            fresh = source
        else:
            fresh = [
                call
                for call in source
                if not (
                    (call.id is not None and (call.id in ids or call.key() in keys_without_id))
                    or (call.id is None and call.key() in keys)
                )
            ]
        for call in fresh:
            merged.append(call)
            keys.add(call.key())
            if call.id is None:
                keys_without_id.add(call.key())
            else:
                ids.add(call.id)
    return merged

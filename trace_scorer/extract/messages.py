"""An observation's input or output → conversation messages, whatever format wrote it.

Formats are recognised per message and per content block rather than per trace: one trace often
mixes them (a LangChain agent on Anthropic writes LangChain messages holding ``tool_use`` blocks), so
every message goes through the same reader and each format contributes what it knows: the reader knows
the shape they share (OpenAI chat: ``role``, ``content`` or ``parts``, ``tool_calls``, ``tool_call_id``,
the legacy ``function_call``) and asks the formats of ``formats.installed_formats()`` for the rest, never naming
one (formats/base.py, the :class:`~trace_scorer.extract.formats.Format` protocol).
The containers understood: a message list; ``{"messages": [...]}`` (OpenAI integration with tools,
LangGraph state, Anthropic request with ``system``); a Chat Completions response (``choices``); a
Responses request (``{"instructions", "input", ...}``) or response (``object: "response"``); one
message. A plain string is one message (``user`` on the input side, ``assistant`` on the output side).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from trace_scorer.extract.formats import BlockHandler, Format, installed_formats
from trace_scorer.extract.model import Call, Content, Msg, Notes, Role, Side, short
from trace_scorer.extract.toolcalls import read_tool_call, read_tool_calls
from trace_scorer.sample import content_text

__all__ = ["MessageReader", "Side"]

_MAX_DEPTH = 6


@dataclass(frozen=True)
class _Tables:
    """The shapes every format shares, then each format's own, merged once (formats/base.py says what
    each table means). Where formats answer through a method, they are asked in ``formats`` order."""

    formats: tuple[Format, ...]
    roles: dict[str, Role]
    #: Messages with a ``type`` but no ``role`` (LangGraph state dumps): type → role name.
    role_by_type: dict[str, str]
    #: Roles that make a ``[role, content]`` pair a message.
    pair_roles: frozenset[str]
    #: Role-less items that are turns of their own: type → the format that reads them.
    item_formats: dict[str, Format]
    block_handlers: dict[str, BlockHandler]
    #: Untyped parts recognised by one key, in order: the first key a part has decides.
    keyed_parts: dict[str, BlockHandler]
    #: Text blocks: type → the key holding the text (OTel text parts use "content").
    text_blocks: dict[str, str]
    #: Blocks that carry no text or calls we score (media, reasoning): skipped without a note.
    ignored_blocks: frozenset[str]
    #: Untyped media parts (Gemini ``inlineData``/``fileData``): skipped without a note.
    media_keys: frozenset[str]
    #: Message keys that may hold calls (besides content blocks).
    call_keys: frozenset[str]
    #: The formats whose ``unwrap`` / ``unpack`` / ``message_calls`` are their own, in order (the
    #: defaults change nothing, find nothing: asking them is time spent on every message).
    unwrappers: tuple[Format, ...] = ()
    unpackers: tuple[Format, ...] = ()
    call_readers: tuple[Format, ...] = ()


def tables_of(formats: tuple[Format, ...]) -> _Tables:
    """The merged tables of ``formats``, asked in this order."""
    return _Tables(
        formats=formats,
        roles={
            "system": "system",
            "user": "user",
            "assistant": "assistant",
            "tool": "tool",
            "ipython": "tool",  # Llama 3's tool role
            **{role: mapped for fmt in formats for role, mapped in fmt.roles.items()},
        },
        role_by_type={kind: role for fmt in formats for kind, role in fmt.message_types.items()},
        pair_roles=frozenset(role for fmt in formats for role in fmt.pair_roles),
        item_formats={kind: fmt for fmt in formats for kind in fmt.item_types},
        block_handlers={kind: h for fmt in formats for kind, h in fmt.blocks.items()},
        keyed_parts={key: h for fmt in formats for key, h in fmt.keyed_parts.items()},
        text_blocks={"text": "text", **{kind: key for fmt in formats for kind, key in fmt.text_blocks.items()}},
        ignored_blocks=frozenset(kind for fmt in formats for kind in fmt.skipped_blocks),
        media_keys=frozenset(key for fmt in formats for key in fmt.skipped_parts),
        call_keys=frozenset({"tool_calls", "toolCalls", "function_call"}).union(*(fmt.call_keys for fmt in formats)),
        unwrappers=tuple(fmt for fmt in formats if _own(fmt, "unwrap")),
        unpackers=tuple(fmt for fmt in formats if _own(fmt, "unpack")),
        call_readers=tuple(fmt for fmt in formats if _own(fmt, "message_calls")),
    )


def _own(fmt: Format, method: str) -> bool:
    """Whether ``fmt`` has its own ``method`` rather than :class:`Format`'s default."""
    return method in getattr(fmt, "__dict__", {}) or getattr(type(fmt), method, None) is not getattr(Format, method)


@cache
def _tables() -> _Tables:
    """Built on first use, with the plug-ins' formats (``installed_formats``)."""
    return tables_of(installed_formats())


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
                    # The kept messages are never handed out (only copies are), so they stay as kept.
                    pristine = previous[index][1]
                    found = [_copy(message) for message in pristine]
                    current.append((item, pristine))
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
            system = _system_prompt(value)
            return [Msg(role="system", content=system), *found] if system else found
        for fmt in _tables().unpackers:
            unpacked = fmt.unpack(value)
            if unpacked is None:
                continue
            held = unpacked.value
            read = self.read(held, unpacked.side or side, where, depth + 1) if held is not None else None
            if read is None and unpacked.required:
                return None
            read = read or []
            return [Msg(role="system", content=unpacked.system), *read] if unpacked.system else read
        return self.read_message(value, side, where)

    def read_message(self, raw: Mapping[str, Any], side: Side, where: str) -> list[Msg] | None:
        """One message (possibly several: Anthropic tool results become one tool message each)."""
        tables = _tables()
        message = raw
        for fmt in tables.unwrappers:
            message = fmt.unwrap(message)
        kind = message.get("type")
        role_value = message.get("role")
        if role_value is None and isinstance(kind, str):
            item_format = tables.item_formats.get(kind)
            if item_format is not None:
                return item_format.read_item(message, kind, self.notes, where)
            role_value = tables.role_by_type.get(kind.lower())
        if role_value is None:
            return None
        role = tables.roles.get(role_value.lower()) if isinstance(role_value, str) else None
        if role is None:
            self.notes.add(f"{where}: message role {short(role_value)} not recognised; message skipped")
            return []
        if (
            role != "tool"
            and len(message) == 2
            and type(text := message.get("content")) is str
            and tables.call_keys.isdisjoint(message)
        ):
            # Its role (or type) and a text, nothing else: the commonest message (a system prompt, a user
            # turn), read as the steps below read it, without them.
            return [Msg(role=role, content=text)]
        tool_call_id = _call_id(message)
        formats = tables.formats
        if role == "tool" and tool_call_id is None and any(fmt.not_a_tool_result(message) for fmt in formats):
            return []  # e.g. a tool definition the LangChain handler appended, not a tool result
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
        if _tables().call_keys.isdisjoint(message):  # most messages: no calls outside the content blocks
            return content.calls
        notes = self.notes
        legacy = message.get("function_call")  # before tool calls were, a call without an id
        legacy_call = read_tool_call(legacy, notes, where=where) if legacy is not None else None
        sources = [read_tool_calls(message.get("tool_calls", message.get("toolCalls")), notes, where=where)]
        for fmt in _tables().call_readers:
            sources.extend(fmt.message_calls(message, notes, where))
        if legacy_call is not None:
            sources.append([legacy_call])
        sources.append(content.calls)
        return _merge_sources(sources)

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
        tables = _tables()
        kind = block.get("type")
        if isinstance(kind, str):
            handler = tables.block_handlers.get(kind)
            if handler is not None:
                handler(block, content, self.notes, where)
                return
            if kind in tables.ignored_blocks:
                return
            key = tables.text_blocks.get(kind)
            if key is None:
                self.notes.add(f"{where}: content block of type {short(kind)} not read")
                return
        else:
            for part_key, part_handler in tables.keyed_parts.items():
                if part_key in block:
                    part_handler(block, content, self.notes, where)
                    return
        text = block.get(key) if isinstance(kind, str) and key is not None else block.get("text")
        if not isinstance(text, str):
            text = block.get("content")
        if isinstance(text, str):
            content.texts.append(text)
        elif kind is None and not tables.media_keys.intersection(block):
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
        and item[0].lower() in _tables().pair_roles
        and isinstance(item[1], str | list)
    )


def _system_prompt(container: Mapping[str, Any]) -> str | None:
    for fmt in _tables().formats:
        system = fmt.system_prompt(container)
        if system is not None:
            return system
    return None


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

"""Conversations as compact text for a judge prompt: roles, tool calls with arguments, cut tool results.

Long traces must fit the judge's context: tool results (and agent instructions) are cut to a configured
length, and when the whole conversation is still too long, messages in the middle are left out — the
first message (the user's request, where the goal is) and the end (where the outcome is) are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from trace_scorer.sample import Message, ToolCall


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated: {len(text) - limit} more characters]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _call_text(call: ToolCall) -> str:
    ident = f" [id {call.id}]" if call.id else ""
    return f"{call.name}({_json(call.arguments)}){ident}"


def _result_text(result: Any) -> str:
    return result if isinstance(result, str) else _json(result)


def render_message(message: Message, *, tool_result_max_chars: int, number: int) -> str:
    if message.role == "tool":
        ref = f" (call {message.tool_call_id})" if message.tool_call_id else ""
        return f"[{number}] tool result{ref}: {truncate(message.content, tool_result_max_chars)}"
    if message.role == "system":
        return f"[{number}] system (agent instructions): {truncate(message.content, tool_result_max_chars)}"
    lines = [f"[{number}] {message.role}: {message.content}".rstrip()]
    for call in message.tool_calls:
        lines.append(f"    -> calls tool {_call_text(call)}")
        if call.result is not None:  # results carried on the call itself (TOOL observations)
            lines.append(f"    <- result: {truncate(_result_text(call.result), tool_result_max_chars)}")
    return "\n".join(lines)


def render_conversation(
    messages: Sequence[Message] | None,
    response: str | None = None,
    *,
    tool_result_max_chars: int = 2000,
    max_chars: int = 100_000,
    include_system: bool = False,
) -> str:
    """The conversation, then the final answer when it is not already the last assistant message."""
    shown = [m for m in messages or () if include_system or m.role != "system"]
    blocks = [
        render_message(m, tool_result_max_chars=tool_result_max_chars, number=i)
        for i, m in enumerate(shown, start=1)
    ]
    last_assistant = next((m.content for m in reversed(shown) if m.role == "assistant"), None)
    if response is not None and response.strip() != (last_assistant or "").strip():
        blocks.append(f"[final answer]: {response}" if response else "[final answer]: (empty)")
    return _fit(blocks, max_chars)


def _fit(blocks: list[str], max_chars: int) -> str:
    """Join blocks; if too long, keep the first and as many last blocks as fit, marking the gap."""
    text = "\n".join(blocks)
    if len(text) <= max_chars or len(blocks) < 2:
        return text if len(text) <= max_chars else truncate(text, max_chars)
    head = truncate(blocks[0], max_chars // 4)
    budget = max_chars - len(head) - 80  # room for the gap marker
    tail: list[str] = []
    for block in reversed(blocks[1:]):
        if len(block) + 1 > budget:
            if not tail:  # even the last message alone is too long: keep its beginning
                tail.append(truncate(block, max(budget - 60, 0)))
            break
        tail.append(block)
        budget -= len(block) + 1
    tail.reverse()
    omitted = len(blocks) - 1 - len(tail)
    gap = [f"[… {omitted} messages left out to fit the judge's context …]"] if omitted else []
    return "\n".join([head, *gap, *tail])


def fit_rendered(text: str, max_chars: int) -> str:
    """A rendered conversation cut to ``max_chars`` by the same rule: its first message and as many last
    ones as fit, the gap marked (messages are the lines starting ``[n]`` or ``[final answer]``)."""
    if len(text) <= max_chars:
        return text
    blocks = re.split(r"\n(?=\[(?:\d+|final answer)\] )", text)
    return _fit(blocks, max_chars)

"""Anthropic Messages API: ``tool_use`` / ``tool_result`` content blocks, ``system`` on the request.

```json
{"role": "assistant", "content": [{"type": "text", "text": "Let me check."},
  {"type": "tool_use", "id": "toolu_01", "name": "get_order", "input": {"order_id": "A-1"}}]}
{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "shipped"}]}
```
Server tools (``server_tool_use`` + ``web_search_tool_result``) are calls too: the model chose them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.formats.base import Format
from trace_scorer.extract.model import Content, Notes
from trace_scorer.extract.toolcalls import read_tool_call


def tool_use(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call = read_tool_call(block, notes, where=where)
    if call is not None:
        content.calls.append(call)


def tool_result(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call_id = block.get("tool_use_id")
    content.results.append((call_id if isinstance(call_id, str) else None, block_text(block.get("content"))))


def block_text(value: Any) -> Any:
    """A tool result's content: a string as is, a list of text blocks joined, anything else as is."""
    if isinstance(value, list):
        texts = [b.get("text") for b in value if isinstance(b, dict)]
        strings = [t for t in texts if isinstance(t, str)]
        if strings:
            return "\n".join(strings)
    return value


def system_text(value: Any) -> str | None:
    """The request's ``system``: a string or a list of text blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        text = block_text(value)
        return text if isinstance(text, str) else None
    return None


BLOCKS = {
    "tool_use": tool_use,
    "server_tool_use": tool_use,
    "tool_result": tool_result,
    "web_search_tool_result": tool_result,
}
#: Content blocks with nothing we score.
SKIPPED_BLOCKS = frozenset({"image", "document", "thinking", "redacted_thinking"})


class Anthropic(Format):
    """Anthropic Messages: ``tool_use`` / ``tool_result`` blocks, the request's ``system`` beside its
    ``messages``."""

    name = "anthropic"
    blocks = BLOCKS
    skipped_blocks = SKIPPED_BLOCKS

    def system_prompt(self, container: Mapping[str, Any]) -> str | None:
        """``system`` (a string or text blocks); else ``instructions``, read the same way."""
        system = system_text(container.get("system"))
        return system if system is not None else system_text(container.get("instructions"))


ANTHROPIC = Anthropic()

"""Vercel AI SDK content parts: ``tool-call`` and ``tool-result`` (recognised by Langfuse too).

```json
{"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "search",
                                   "args": {"q": "refund policy"}}]}
{"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "search",
                              "result": "30 days"}]}
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.formats.base import Format
from trace_scorer.extract.model import Content, Notes
from trace_scorer.extract.toolcalls import read_tool_call


def tool_call(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call = read_tool_call(block, notes, where=where)
    if call is not None:
        content.calls.append(call)


def tool_result(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call_id = block.get("toolCallId")
    result = block.get("result", block.get("output"))
    content.results.append((call_id if isinstance(call_id, str) else None, result))


BLOCKS = {"tool-call": tool_call, "tool-result": tool_result}
#: Tool-result output parts with nothing we score.
SKIPPED_BLOCKS = frozenset({"media"})


class AiSdk(Format):
    """Vercel AI SDK: ``tool-call`` / ``tool-result`` parts."""

    name = "aisdk"
    blocks = BLOCKS
    skipped_blocks = SKIPPED_BLOCKS


AISDK = AiSdk()

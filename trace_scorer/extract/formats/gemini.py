"""Google Gemini / Vertex parts (untyped): ``functionCall`` and ``functionResponse``.

```json
{"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}]}
{"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp": 21}}}]}
```
Gemini calls often have no id; the response then names the tool only, so it is kept as a tool message
without an id (results are tied to calls by id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trace_scorer.extract.formats.base import Format
from trace_scorer.extract.model import Content, Notes, Role
from trace_scorer.extract.toolcalls import read_tool_call


def function_call(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    call = read_tool_call(block.get("functionCall", block.get("function_call")), notes, where=where)
    if call is not None:
        content.calls.append(call)


def function_response(block: Mapping[str, Any], content: Content, notes: Notes, where: str) -> None:
    response = block.get("functionResponse", block.get("function_response"))
    if isinstance(response, dict):
        call_id = response.get("id")
        content.results.append((call_id if isinstance(call_id, str) else None, response.get("response")))


#: Untyped parts, recognised by their one key.
KEYED_PARTS = {
    "functionCall": function_call,
    "function_call": function_call,
    "functionResponse": function_response,
    "function_response": function_response,
}
#: Untyped media and reasoning parts: nothing we score.
SKIPPED_PARTS = frozenset({"inlineData", "inline_data", "fileData", "file_data", "thought", "executableCode"})
ROLES: dict[str, Role] = {"model": "assistant"}


class Gemini(Format):
    """Gemini / Vertex: untyped ``functionCall`` / ``functionResponse`` parts, the ``model`` role."""

    name = "gemini"
    roles = ROLES
    keyed_parts = KEYED_PARTS
    skipped_parts = SKIPPED_PARTS


GEMINI = Gemini()

"""Extraction's working types: calls and messages before they become the Sample's pydantic models.

Plain slotted dataclasses: extraction builds and compares many of them per trace (every generation
repeats the history), so they stay cheap; the Sample's validated models are built once at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from trace_scorer.data import jsonbytes

Role = Literal["system", "user", "assistant", "tool"]
#: Which payload of a GENERATION is read: a plain string is the user's turn in the input, the answer in
#: the output.
Side = Literal["input", "output"]

#: Where unreadable arguments are kept: a call whose arguments are not a JSON object keeps them,
#: unparsed, under this key (docs/formats.md, "Arguments that are not an object").
RAW_ARGUMENTS_KEY = "_raw"

#: At most this many notes per sample; the rest are counted in a last note.
MAX_NOTES = 20


@dataclass(slots=True)
class Call:
    """One tool call: name, arguments (a dict), the provider's call id, and the result when known."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None
    result: Any = None
    #: Why its execution failed (a TOOL observation's ERROR level or an error output), when it did.
    error: str | None = None
    #: Position in the trace (observation order); sorts message calls and TOOL observations together.
    order: float = 0.0
    _key: str | None = None

    def key(self) -> str:
        """Name and arguments as one comparable string (what "the same call" means without ids)."""
        if self._key is None:
            self._key = self.name + "\x00" + _identity(self.arguments)
        return self._key


@dataclass(slots=True)
class Msg:
    """One conversation message in OpenAI roles."""

    role: Role
    content: str = ""
    calls: list[Call] = field(default_factory=list)
    tool_call_id: str | None = None
    #: A tool message's result as given (an object stays an object); ``content`` is its text.
    result: Any = None
    order: float = 0.0
    _key: str | None = None

    def key(self) -> str:
        """Identity for history de-duplication: role, text, tool call id, and the calls made."""
        if self._key is None:
            calls = "\x01".join(f"{c.id or ''}\x02{c.key()}" for c in self.calls)
            self._key = f"{self.role}\x00{self.tool_call_id or ''}\x00{self.content}\x00{calls}"
        return self._key


def _identity(value: Any) -> str:
    """``value`` as sorted compact JSON: equal for values whose JSON is equal (compared, never shown).
    orjson where it writes what the standard library writes (:func:`jsonbytes.plain`), so a value of
    either kind compares as before; a fifth of the time for the arguments of every call of a trace."""
    if jsonbytes.plain(value):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


class Notes:
    """What extraction could not read: short sentences, each once, at most :data:`MAX_NOTES`."""

    __slots__ = ("_dropped", "_items", "_seen")

    def __init__(self) -> None:
        self._items: list[str] = []
        self._seen: set[str] = set()
        self._dropped = 0

    def add(self, text: str) -> None:
        if text in self._seen:
            return
        self._seen.add(text)
        if len(self._items) < MAX_NOTES:
            self._items.append(text)
        else:
            self._dropped += 1

    def as_list(self) -> list[str]:
        if self._dropped:
            return [*self._items, f"... and {self._dropped} more problems of other kinds"]
        return list(self._items)


def short(value: Any, limit: int = 60) -> str:
    """A value shortened for a note (notes are read by people, in a terminal or a log line)."""
    text = value if isinstance(value, str) else _canonical(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True)
class Content:
    """What one message's content holds: text parts, calls made, and tool results given back."""

    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    #: (tool call id, result) pairs, in order; each becomes a ``tool`` message.
    results: list[tuple[str | None, Any]] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(filter(None, self.texts))  # the non-empty parts

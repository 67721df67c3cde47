"""The :class:`Format` protocol: what extraction asks of each message format.

The message reader (:mod:`trace_scorer.extract.messages`) and the TOOL observation reader
(:mod:`trace_scorer.extract.tools`) know the shapes every format shares (a message with ``role`` and
``content`` or ``parts``, ``tool_calls``, typed text blocks); everything one format writes its own way
is asked of the formats in :data:`trace_scorer.extract.formats.FORMATS`, in that order. A format
subclasses :class:`Format` and overrides only what it writes: the defaults know nothing.

The tables (``roles``, ``blocks``...) are merged once, at import, into one lookup each, so a format
costs nothing on messages that are not its own; a type or key two formats both claim is an error
(tests/unit/extract/test_extract_formats.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from trace_scorer.extract.model import Call, Content, Msg, Notes, Role, Side

#: Reads one content block (or untyped part) into the message's content: texts, calls, results.
BlockHandler = Callable[[Mapping[str, Any], Content, Notes, str], None]

_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Unpacked:
    """A container that is not a message itself, but holds messages (a provider's request/response).

    ``value`` is read as messages in the container's place, on ``side`` (None: the container's side);
    a non-empty ``system`` is put first as a system message. With ``required``, a missing (None) or
    unreadable ``value`` makes the container unreadable; without, it just holds no messages.
    """

    value: Any
    system: str | None = None
    side: Side | None = None
    required: bool = True


class Format(Protocol):
    """One message format (a provider's API or a framework's serialization), as extraction reads it."""

    #: Short name, for docs and tests.
    name: ClassVar[str]

    # --- messages ------------------------------------------------------------------------------
    #: Role names this format uses → the OpenAI role (``"human"`` → ``"user"``), lower case.
    roles: ClassVar[Mapping[str, Role]] = _NONE
    #: Messages with a ``type`` but no ``role``: type (lower case) → role name (then read by ``roles``).
    message_types: ClassVar[Mapping[str, str]] = _NONE
    #: Roles that make a two-item list ``[role, content]`` a message (LangChain's tuples), lower case.
    pair_roles: ClassVar[frozenset[str]] = frozenset()
    #: Role-less typed items that are not messages but turns of their own (calls, call outputs):
    #: each item whose ``type`` is listed here is read by :meth:`read_item`.
    item_types: ClassVar[frozenset[str]] = frozenset()

    def unpack(self, container: Mapping[str, Any]) -> Unpacked | None:
        """A request or response object holding messages → what to read instead; None: not one of
        this format's containers. (``{"messages": [...]}`` is read by every format; see
        :meth:`system_prompt`.)"""
        return None

    def system_prompt(self, container: Mapping[str, Any]) -> str | None:
        """The system prompt of a ``{"messages": [...]}`` container, when this format puts it beside
        the messages; None when it does not."""
        return None

    def unwrap(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """A message in this format's envelope → the message inside; anything else unchanged."""
        return message

    def read_item(self, item: Mapping[str, Any], kind: str, notes: Notes, where: str) -> list[Msg]:
        """One item whose ``type`` is in :attr:`item_types` → the messages it stands for."""
        return []

    def not_a_tool_result(self, message: Mapping[str, Any]) -> bool:
        """A ``tool`` message without a call id that is not a tool result (and is dropped)."""
        return False

    # --- calls ---------------------------------------------------------------------------------
    #: Message keys (besides ``tool_calls`` and the content) where this format keeps calls: a message
    #: with none of any format's keys skips :meth:`message_calls` altogether.
    call_keys: ClassVar[frozenset[str]] = frozenset()

    def message_calls(self, message: Mapping[str, Any], notes: Notes, where: str) -> list[list[Call]]:
        """The calls this format keeps outside ``tool_calls`` and the content, one list per place.
        One call may be listed in several places: it is kept once, as the first place lists it, in
        this order: ``tool_calls``, the formats' places (in :data:`~trace_scorer.extract.formats.FORMATS`
        order), the legacy ``function_call``, the content blocks."""
        return []

    # --- content -------------------------------------------------------------------------------
    #: Typed content blocks this format reads itself: ``type`` → handler (calls, tool results).
    blocks: ClassVar[Mapping[str, BlockHandler]] = _NONE
    #: Untyped parts recognised by one key (Gemini's ``functionCall``): key → handler, in order.
    keyed_parts: ClassVar[Mapping[str, BlockHandler]] = _NONE
    #: Typed text blocks: ``type`` → the key holding the text.
    text_blocks: ClassVar[Mapping[str, str]] = _NONE
    #: Typed blocks with nothing we score (media, reasoning): skipped without a note.
    skipped_blocks: ClassVar[frozenset[str]] = frozenset()
    #: Untyped parts with nothing we score, by one of their keys: skipped without a note.
    skipped_parts: ClassVar[frozenset[str]] = frozenset()

    # --- TOOL observations ---------------------------------------------------------------------
    def tool_name(self, name: str) -> str | None:
        """A TOOL observation named the way this format names its spans → the tool's name; None: not
        such a name."""
        return None

    def tool_output(self, output: Any) -> tuple[Any, str | None] | None:
        """A TOOL observation's output in this format's envelope → (result, call id); None: not one."""
        return None

    def tool_call_id(self, metadata: Mapping[str, Any]) -> str | None:
        """The call id a TOOL observation's metadata holds in this format's attributes."""
        return None

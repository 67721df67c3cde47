"""The conversation across generations, each message once.

Every generation's input repeats the history so far, often with changes: a system prompt that holds
the current time, a window that drops old turns, a sub-agent with its own prompt. A generation's
messages (input, then output) are walked against the conversation built so far: a message found there
(at or after the last match, so order is kept) is already known; the messages after the *last* known
one are new and appended. Known-but-edited messages before that point (a refreshed system prompt) are
not appended again. A generation sharing nothing with the conversation (a sub-agent) is appended
whole.
"""

from __future__ import annotations

from trace_scorer.extract.model import Msg


class Conversation:
    """Messages in order, each once; ``order`` says where each came from in the trace."""

    def __init__(self) -> None:
        self.messages: list[Msg] = []
        self._keys: list[str] = []
        #: The keys in ``_keys``: a generation's new messages (its answer, at least) are not searched for.
        self._known: set[str] = set()

    def extend(self, incoming: list[Msg]) -> list[Msg]:
        """Append what is new in ``incoming``; returns the messages appended."""
        keys = self._keys
        position = 0
        last_known = -1
        for index, message in enumerate(incoming):
            key = message.key()
            found = _find(keys, key, position) if key in self._known else -1
            if found >= 0:
                position = found + 1
                last_known = index
        fresh = incoming[last_known + 1 :]
        for message in fresh:
            self.messages.append(message)
            key = message.key()
            keys.append(key)
            self._known.add(key)
        return fresh


def _find(keys: list[str], key: str, start: int) -> int:
    if start < len(keys) and keys[start] == key:  # the common case: history repeated in order
        return start
    try:
        return keys.index(key, start)
    except ValueError:
        return -1

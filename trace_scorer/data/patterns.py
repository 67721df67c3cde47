"""User-supplied regular expressions, matched in linear time (RE2).

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` takes seconds on a 26-character name and holds the
event loop (health endpoints stop answering). RE2 guarantees time linear in the text and refuses what
needs backtracking (back-references, look-around) at start-up, with the reason — written by hand nowhere:
``google-re2`` is Google's own binding.
"""

from __future__ import annotations

from typing import Any

import re2  # type: ignore[import-untyped]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error comes back as an exception; no stray line on stderr


class SafePattern:
    """A compiled RE2 pattern; ``search`` finds it anywhere in the text, as ``re.search`` does."""

    def __init__(self, pattern: str) -> None:
        try:
            self._compiled: Any = re2.compile(pattern, _OPTIONS)
        except re2.error as error:
            reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
            raise ValueError(
                f"{pattern!r} is not a pattern RE2 accepts ({reason}); back-references and look-around are "
                "not supported, since they need backtracking"
            ) from None
        self.pattern = pattern

    def search(self, text: str) -> bool:
        return self._compiled.search(text) is not None

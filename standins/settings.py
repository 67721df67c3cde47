"""Settings given as names and values (JSON, CLI flags, overrides): a name a dataclass does not have is
refused with the names it has, so a typo fails where it is made instead of being ignored."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any


def refuse_unknown(owner: Any, names: Iterable[str], what: str) -> None:
    """Raise ValueError when ``names`` holds one that the dataclass ``owner`` (class or instance) lacks."""
    known = {f.name for f in fields(owner)}
    unknown = set(names) - known
    if unknown:
        raise ValueError(f"unknown {what} {sorted(unknown)}; known: {sorted(known)}")

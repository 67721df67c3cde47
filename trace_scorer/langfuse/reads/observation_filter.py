"""Which observations of a trace are each one sample (``scope = "observation"``): the filter, checked on
our side on every row, and the part of it a v4 server can apply itself (for types without children:
:data:`extract.observations.LEAF_TYPES`).

Rows come as Langfuse sends them, so nothing here trusts a field's type: a name that is not text matches
no pattern, a level that is absent is ``DEFAULT`` (Langfuse's default), metadata is read in every shape
Langfuse returns (flattened v4 keys, nested, nested as JSON text: :func:`filters.metadata_value`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trace_scorer.config.targets import TargetSettings
from trace_scorer.data.patterns import SafePattern
from trace_scorer.extract.observations import LEAF_TYPES
from trace_scorer.langfuse.reads.filters import as_text, metadata_value

#: Langfuse's level of an observation that has none.
DEFAULT_LEVEL = "DEFAULT"
#: A name pattern that is one exact name (``^ChatOpenAI$``): sent to a v4 server as a name condition.
_EXACT_NAME = re.compile(r"\^([A-Za-z0-9 _:/-]+)\$")


@dataclass(frozen=True)
class ObservationFilter:
    """Every given condition must hold; an empty one does not filter."""

    types: tuple[str, ...] = ("GENERATION",)
    name_pattern: SafePattern | None = None
    levels: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, target: TargetSettings) -> ObservationFilter | None:
        """A target's ``[targets.observations]``; None unless its scope is "observation"."""
        if target.scope != "observation":
            return None
        o = target.observations
        return cls(
            types=tuple(dict.fromkeys(o.types)),
            name_pattern=SafePattern(o.name_pattern) if o.name_pattern is not None else None,
            levels=tuple(dict.fromkeys(o.levels)),
            metadata=dict(o.metadata),
        )

    def matches(self, row: Mapping[str, Any]) -> bool:
        kind = row.get("type")
        if self.types and (not isinstance(kind, str) or kind.upper() not in self.types):
            return False
        if self.name_pattern is not None:
            name = row.get("name")
            if not isinstance(name, str) or not self.name_pattern.search(name):
                return False
        if self.levels:
            level = row.get("level")
            if (level if isinstance(level, str) and level else DEFAULT_LEVEL) not in self.levels:
                return False
        if self.metadata:
            metadata = row.get("metadata")
            if not isinstance(metadata, Mapping):
                return False
            return all(as_text(metadata_value(metadata, k)) == v for k, v in self.metadata.items())
        return True

    @property
    def leaves_only(self) -> bool:
        """Whether every observation the filter can match has no children (so reading only the matching
        rows loses nothing a sample is built from)."""
        return bool(self.types) and set(self.types) <= LEAF_TYPES

    def v4_conditions(self) -> list[dict[str, Any]]:
        """The conditions of ``GET /api/public/v2/observations``'s ``filter`` a server applies itself:
        type and level (``any of``), and the name when the pattern is one exact name (``^name$``). Other
        patterns (RE2) and metadata are checked on our side only (as every condition is, on every row)."""
        conditions: list[dict[str, Any]] = []
        exact = _EXACT_NAME.fullmatch(self.name_pattern.pattern) if self.name_pattern is not None else None
        if exact is not None:
            conditions.append({"type": "string", "column": "name", "operator": "=", "value": exact.group(1)})
        if self.types:
            conditions.append(
                {"type": "stringOptions", "column": "type", "operator": "any of", "value": list(self.types)}
            )
        if self.levels:
            conditions.append(
                {"type": "stringOptions", "column": "level", "operator": "any of", "value": list(self.levels)}
            )
        return conditions

"""What a user-written judge is: a prompt template, its variables and the output it asks for.

``llm_judge`` builds one from its settings, or takes one of Langfuse's evaluators by name
(langfuse/server/evaluators.py reads them from the server at start-up). Neutral: no HTTP, no metric code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trace_scorer.data.outcomes import DataType


@dataclass(frozen=True)
class OutputDefinition:
    """The score the judge gives: its Langfuse data type, the range (NUMERIC) or the categories
    (CATEGORICAL), and what the score and the reasoning mean (told to the judge)."""

    data_type: DataType = "NUMERIC"
    min_value: float | None = 0.0
    max_value: float | None = 1.0
    categories: tuple[str, ...] = ()
    score: str = ""
    reasoning: str = ""


@dataclass(frozen=True)
class JudgeDefinition:
    """One judge prompt: the template, its variables, its output; ``source`` says where it came from
    (``settings``, or ``langfuse:managed`` / ``langfuse:project`` with the evaluator's id and version)."""

    name: str
    prompt: str
    variables: tuple[str, ...]
    output: OutputDefinition
    source: str = "settings"
    evaluator_id: str | None = None
    version: int | None = None
    #: Paths for variables the settings leave unmapped (Langfuse's default mapping, translated).
    default_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

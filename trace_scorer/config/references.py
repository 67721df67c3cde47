"""``[targets.references]``: where a sample's reference fields are read from, as simple JSON paths.

A path is ``$`` followed by ``.key``, ``["key"]`` / ``['key']`` (for keys with dots or spaces) and
``[n]`` (list index, negative from the end), e.g. ``$.expectedOutput.answer``,
``$.trace.metadata["langfuse.topic"]``, ``$.expectedOutput.steps[-1]``. ``$`` is the dataset/experiment
item (``expectedOutput``, ``metadata``, ``experimentItemMetadata``, ``input``, ...) with the trace added
under ``trace`` (``metadata``, ``input``, ``output``, ``name``, ``tags``...). Each field takes one path
or a list tried in order; the first that gives a usable value wins; ``[]`` turns the field off.

The path language is hand-written (a dozen lines) rather than taken from jsonpath-ng/jmespath: we need
only key/index steps, want the ``$.a.b`` spelling users know from Langfuse's evaluator mappings, and
must step *into* JSON-encoded strings (Langfuse v4 returns metadata values as strings), which no
library does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from trace_scorer.config.common import StrictModel

PathStep = str | int

_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z0-9_\-]+)
      | \[(?P<index>-?\d+)\]
      | \["(?P<dq>(?:[^"\\]|\\.)*)"\]
      | \['(?P<sq>(?:[^'\\]|\\.)*)'\]""",
    re.VERBOSE,
)
_UNESCAPE = re.compile(r"\\(.)")


@lru_cache(maxsize=1024)
def parse_path(text: str) -> tuple[PathStep, ...]:
    """``"$.a[0]['b.c']"`` → ``("a", 0, "b.c")``; ValueError naming the position of a mistake."""
    if not isinstance(text, str) or not text.startswith("$"):
        raise ValueError(f"{text!r} is not a path: paths start with '$', e.g. '$.expectedOutput.answer'")
    steps: list[PathStep] = []
    position = 1
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            raise ValueError(
                f"{text!r}: cannot read the path at position {position} ({text[position:]!r}); "
                'use .key, ["key"] or [index]'
            )
        if match.group("name") is not None:
            steps.append(match.group("name"))
        elif match.group("index") is not None:
            steps.append(int(match.group("index")))
        else:
            quoted = match.group("dq") if match.group("dq") is not None else match.group("sq")
            steps.append(_UNESCAPE.sub(r"\1", quoted))
        position = match.end()
    return tuple(steps)


def _path_list(value: Any) -> Any:
    """One path or a list of paths; every path is checked at start-up."""
    paths = [value] if isinstance(value, str) else value
    if isinstance(paths, list | tuple):
        for path in paths:
            parse_path(path)
        return list(paths)
    return value  # let pydantic report the wrong type


#: One JSON path or a list of them, tried in order.
PathList = Annotated[list[str], BeforeValidator(_path_list)]

DEFAULT_EXPECTED = [
    "$.expectedOutput",
    "$.expectedOutput.answer",
    "$.expectedOutput.output",
    "$.expectedOutput.expected",
]
DEFAULT_REFERENCE = ["$.expectedOutput.goal", "$.expectedOutput.reference"]
DEFAULT_REFERENCE_TOOL_CALLS = [
    "$.expectedOutput.tool_calls",
    "$.expectedOutput.reference_tool_calls",
    "$.expectedOutput.expected_tools",
]
DEFAULT_REFERENCE_TOPICS = [
    "$.metadata.reference_topics",
    "$.experimentItemMetadata.reference_topics",
    "$.expectedOutput.reference_topics",
    "$.trace.metadata.reference_topics",
]
DEFAULT_TOOL_SEQUENCE_MATTERS = [
    "$.expectedOutput.tool_sequence_matters",
    "$.metadata.tool_sequence_matters",
    "$.experimentItemMetadata.tool_sequence_matters",
]
DEFAULT_FINAL_ANSWER_USES_TOOLS = [
    "$.expectedOutput.final_answer_uses_tools",
    "$.metadata.final_answer_uses_tools",
    "$.experimentItemMetadata.final_answer_uses_tools",
    "$.trace.metadata.final_answer_uses_tools",
]


#: ``{{ name }}``: a judge prompt's placeholders, as Langfuse's evaluators write them (letters, digits,
#: ``_``, ``-`` and ``.``; spaces allowed inside). judge/template.py fills them.
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}")


def template_variables(template: str) -> tuple[str, ...]:
    """The variables ``template`` uses, in order of first appearance."""
    return tuple(dict.fromkeys(match.group(1) for match in PLACEHOLDER.finditer(template)))


#: Where an ``llm_judge`` variable is read from when its settings do not map it (Langfuse's evaluators
#: name their variables this way): the first path that gives a value wins.
#: ``input`` and ``output`` read the sample's own observation first: for a trace it is the trace's root
#: (the same values as ``$.trace``), for a session the last turn's root, for ``scope = "observation"`` the
#: observation scored — what Langfuse's observation evaluators quote.
DEFAULT_VARIABLE_PATHS: dict[str, list[str]] = {
    "input": ["$.observation.input", "$.trace.input"],
    "query": ["$.observation.input", "$.trace.input"],
    "question": ["$.observation.input", "$.trace.input"],
    "output": ["$.observation.output", "$.trace.output"],
    "generation": ["$.observation.output", "$.trace.output"],
    "answer": ["$.observation.output", "$.trace.output"],
    "response": ["$.observation.output", "$.trace.output"],
    "expected_output": ["$.expectedOutput"],
    "ground_truth": ["$.expectedOutput"],
    "reference": ["$.expectedOutput"],
    "context": ["$.observations.by_type.RETRIEVER.output", "$.trace.metadata.context"],
    "metadata": ["$.trace.metadata"],
    "conversation": ["$.sample.messages"],
}


def judge_variable_paths(options: dict[str, Any]) -> list[str]:
    """Every path an ``llm_judge`` metric's options may read (its ``variables``, and the defaults for
    an evaluator whose variables are known only at start-up); paths that do not parse are left to the
    plan's check, which reports them."""
    paths: list[str] = []
    mapped = options.get("variables")
    if isinstance(mapped, dict):
        for value in mapped.values():
            if isinstance(value, str):
                paths.append(value)
            elif isinstance(value, list):
                paths += [v for v in value if isinstance(v, str)]
    template = options.get("prompt")
    if options.get("evaluator") is not None:
        paths += [p for defaults in DEFAULT_VARIABLE_PATHS.values() for p in defaults]
    elif isinstance(template, str):
        unmapped = [v for v in template_variables(template) if not isinstance(mapped, dict) or v not in mapped]
        paths += [p for v in unmapped for p in DEFAULT_VARIABLE_PATHS.get(v, [])]
    usable = []
    for path in dict.fromkeys(paths):
        try:
            parse_path(path)
        except ValueError:
            continue
        usable.append(path)
    return usable


class ReferenceSettings(StrictModel):
    """Where each reference field of the sample comes from (docs/formats.md, "References")."""

    #: Expected answer (text). Objects are not text: the defaults read a string expectedOutput or
    #: its ``answer``/``output``/``expected`` key.
    expected: PathList = Field(default_factory=lambda: list(DEFAULT_EXPECTED))
    #: The goal the conversation should reach (agent_goal_accuracy), text.
    reference: PathList = Field(default_factory=lambda: list(DEFAULT_REFERENCE))
    #: The calls that should have been made: a list of tool calls in any recognised shape.
    reference_tool_calls: PathList = Field(default_factory=lambda: list(DEFAULT_REFERENCE_TOOL_CALLS))
    #: Allowed topics: a list of strings (or a JSON/comma-separated string).
    reference_topics: PathList = Field(default_factory=lambda: list(DEFAULT_REFERENCE_TOPICS))
    tool_sequence_matters: PathList = Field(default_factory=lambda: list(DEFAULT_TOOL_SEQUENCE_MATTERS))
    final_answer_uses_tools: PathList = Field(default_factory=lambda: list(DEFAULT_FINAL_ANSWER_USES_TOOLS))
    #: Paths whose values extraction keeps in ``Sample.variables`` for judge prompts (``llm_judge``): the
    #: target adds every path its ``llm_judge`` metrics map a variable to (config/targets.py).
    variables: PathList = Field(default_factory=list)

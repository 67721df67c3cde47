"""Reference fields (expected answer, goal, reference calls, topics, flags) from the item and the trace.

The paths of :class:`~trace_scorer.config.references.ReferenceSettings` are resolved against one
document: the dataset/experiment item as given (``expectedOutput``, ``metadata``,
``experimentItemMetadata``, ``input``...) with the trace added under ``trace``. Stepping into a string
that holds JSON parses it (Langfuse v4 returns metadata values as strings). A path that resolves to
nothing (or to null) gives way to the next one; a value of the wrong kind is noted when the user
configured that field, and skipped quietly for the defaults (they probe several places on purpose).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from trace_scorer.config.references import PathStep, ReferenceSettings, parse_path
from trace_scorer.data import jsonbytes
from trace_scorer.data.rows import json_in_text
from trace_scorer.extract.model import Call, Notes, short
from trace_scorer.extract.toolcalls import read_tool_call

#: What :func:`resolve` gives for a path that leads nowhere.
MISSING = _MISSING = object()
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


class WrongKind(ValueError):
    """A value found at a path is not of the kind the field needs (the message says what it is)."""


def resolve(document: Any, path: str) -> Any:
    """The value at ``path`` in ``document``, or ``_MISSING``. Never raises on data."""
    return _walk(document, parse_path(path))


def _walk(current: Any, steps: tuple[PathStep, ...]) -> Any:
    """Follow ``steps``; a string holding JSON is parsed on the way. Langfuse v4 flattens nested metadata
    to dotted keys (``{"a": {"b": 1}}`` comes back as ``{"a.b": 1}``), so at an object the steps may also
    match one dotted key — the nested and the flattened shape resolve alike."""
    if not steps:
        return current
    if isinstance(current, str):
        current = json_in_text(current)  # a string that is not JSON leads nowhere: _MISSING below
    step = steps[0]
    if type(current) is dict or isinstance(current, Mapping):  # a dict without the ABC's check
        if isinstance(step, str) and step in current:
            found = _walk(current[step], steps[1:])
            if found is not _MISSING:
                return found
        for end, key in _dotted_keys(steps) if len(steps) > 1 else ():
            if key in current:
                found = _walk(current[key], steps[end:])
                if found is not _MISSING:
                    return found
        return _MISSING
    if isinstance(current, list) and isinstance(step, int) and -len(current) <= step < len(current):
        return _walk(current[step], steps[1:])
    return _MISSING


@functools.lru_cache(maxsize=1024)
def _dotted_keys(steps: tuple[PathStep, ...]) -> tuple[tuple[int, str], ...]:
    """The flattened keys the first steps may form, the longest first, with how many steps each takes
    (cached: every default path probes them at each object it meets, for every trace)."""
    return tuple((end, ".".join(str(s) for s in steps[:end])) for end in range(len(steps), 1, -1))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise WrongKind(f"is {_kind(value)}, not text")


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    raise WrongKind(f"is {short(value)}, not true/false")


def _topics(value: Any) -> list[str]:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = jsonbytes.loads(stripped)
            except (ValueError, RecursionError):
                raise WrongKind("is a string starting with '[' that is not a JSON list") from None
        else:
            return [part.strip() for part in stripped.split(",") if part.strip()]
    if isinstance(value, list):
        topics = []
        for item in value:
            if isinstance(item, str):
                topics.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                topics.append(str(item))
            else:
                raise WrongKind(f"holds {_kind(item)}, not a topic string")
        return topics
    raise WrongKind(f"is {_kind(value)}, not a list of topics")


def _tool_calls(value: Any) -> list[dict[str, Any]]:
    """The calls as :class:`~trace_scorer.sample.ToolCall` fields: the sample's validation builds them."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = jsonbytes.loads(value)
        except (ValueError, RecursionError):
            raise WrongKind("is a string that is not a JSON list") from None
    if not isinstance(value, list):
        raise WrongKind(f"is {_kind(value)}, not a list of tool calls")
    calls = []
    for index, item in enumerate(value):
        problems = Notes()
        call: Call | None = read_tool_call(item, problems, where=f"item {index}")
        if call is None or problems.as_list():
            reason = "; ".join(problems.as_list()) or "unreadable"
            raise WrongKind(f"entry {index} cannot be read ({reason})")
        calls.append({"name": call.name, "arguments": call.arguments, "id": call.id, "result": call.result})
    return calls


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    return short(value)


#: Field → how a found value is read (a WrongKind means "not usable here").
READERS: dict[str, Callable[[Any], Any]] = {
    "expected": _text,
    "reference": _text,
    "reference_tool_calls": _tool_calls,
    "reference_topics": _topics,
    "tool_sequence_matters": _flag,
    "final_answer_uses_tools": _flag,
}


def read_references(
    document: Mapping[str, Any], settings: ReferenceSettings, notes: Notes
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each reference field's value (absent fields left out) and the path it came from; what could
    not be used is noted."""
    found: dict[str, Any] = {}
    sources: dict[str, str] = {}
    configured = settings.model_fields_set
    heads = _heads(document)
    for field_name, reader in READERS.items():
        explicit = field_name in configured
        for path in getattr(settings, field_name):
            steps = parse_path(path)
            if steps and _absent(document, heads, steps[0]):
                continue  # most default paths: the document has no such part (a worker's has only the trace)
            value = _walk(document, steps)
            if value is _MISSING or value is None:
                continue
            try:
                found[field_name] = reader(value)
                sources[field_name] = path
                break
            except WrongKind as problem:
                # A malformed reference is never half-used: the field stays absent, so the metric
                # is skipped with a reason instead of scoring against a wrong reference.
                if explicit or field_name == "reference_tool_calls":
                    notes.add(f"references.{field_name}: {path} {problem}; not used")
    return found, sources


def _heads(document: Mapping[str, Any]) -> frozenset[str]:
    """The first part of each of the document's keys (``a`` of ``a.b``): a path starting elsewhere
    finds nothing in it (:func:`_absent`)."""
    return frozenset(key.partition(".")[0] for key in document if isinstance(key, str))


def _absent(document: Mapping[str, Any], heads: frozenset[str], first: PathStep) -> bool:
    """Whether a path whose first step is ``first`` resolves to nothing in ``document`` without walking
    it: ``first`` is not one of its keys and no flattened key of it starts with ``first``."""
    return first not in document and str(first).partition(".")[0] not in heads


def describe_unused(expected_output: Any, sources: Mapping[str, str], notes: Notes) -> None:
    """An object expectedOutput from which nothing was taken: say where the defaults looked."""
    used = any(path.startswith("$.expectedOutput") for path in sources.values())
    if isinstance(expected_output, Mapping) and expected_output and not used:
        keys = ", ".join(sorted(map(str, expected_output))[:8])
        notes.add(
            "expectedOutput is an object without answer/output/expected/goal/reference/tool_calls "
            f"(keys: {keys}); set [targets.references] to read it"
        )

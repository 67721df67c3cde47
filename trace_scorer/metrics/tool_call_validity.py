"""ToolCallValidity: the share of tool calls that name a declared tool and whose arguments validate
against that tool's JSON Schema (docs/metrics.md; no reference, no LLM).

The declared tools are the ``tools`` of the generations' inputs (``Sample.tools``). Validation is the
``jsonschema`` library's, with the schema's own ``$schema`` dialect (Draft 2020-12 when it names none).

Decisions (also in docs/metrics.md):
- A call naming a tool that was not declared is invalid; so is a call whose tool declares a schema that
  is not a valid JSON Schema (the agent was offered a broken tool; the reason says so), or one that cannot
  be checked at all (a ``$ref`` to a document that is not inside the schema: nothing is fetched).
- A tool declared without a schema takes any arguments.
- Bounded work on hostile input: arguments longer than ``max_argument_chars`` (as JSON) are not checked
  and are left out of the share (listed as unchecked); regular expressions in schemas (``pattern``,
  ``patternProperties``) run on RE2 (linear time, trace_scorer/data/patterns.py), never Python's backtracking
  ``re``; a schema or arguments nested too deeply for the validator count the call invalid, with the reason.
- No call, or no call that could be checked: skipped with the reason (nothing to score is not 0 or 1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, ClassVar

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from pydantic import Field

from trace_scorer.data.outcomes import Outcome, Score, Skipped
from trace_scorer.data.patterns import SafePattern
from trace_scorer.metrics.base import Metric, MetricOptions, MetricOutput
from trace_scorer.sample import Sample, ToolSpec

#: At most this many reasons per invalid call.
MAX_REASONS = 3
#: Validators kept across samples, by schema.
CACHED_SCHEMAS = 1024


class ToolCallValidityOptions(MetricOptions):
    """Options of ``tool_call_validity``."""

    #: Arguments longer than this (as JSON text) are not validated (left out of the share).
    max_argument_chars: int = Field(default=100_000, ge=1)


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> SafePattern:
    return SafePattern(pattern)


def _re2_pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``pattern`` on RE2: Python's ``re`` may take exponential time on a hostile pattern."""
    if validator.is_type(instance, "string") and isinstance(pattern, str):
        try:
            matched = _pattern(pattern).search(instance)
        except ValueError as exc:
            yield ValidationError(f"the schema's pattern cannot be checked: {exc}")
            return
        if not matched:
            yield ValidationError(f"{instance[:60]!r} does not match {pattern!r}")


def _re2_pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``patternProperties`` on RE2, otherwise as jsonschema does it."""
    if not validator.is_type(instance, "object") or not isinstance(patterns, Mapping):
        return
    for pattern, subschema in patterns.items():
        try:
            compiled = _pattern(pattern)
        except ValueError as exc:
            yield ValidationError(f"the schema's pattern cannot be checked: {exc}")
            return
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _safe(cls: type[Validator]) -> type[Validator]:
    extended: type[Validator] = validators.extend(
        cls, {"pattern": _re2_pattern, "patternProperties": _re2_pattern_properties}
    )
    return extended


_SAFE: dict[type[Validator], type[Validator]] = {}


def _validator(schema: Any) -> Validator | str:
    """A validator for a declared schema, or why there is none. An agent declares the same tools on
    every trace, and checking a schema against its metaschema costs ~1 ms: validators are kept by the
    schema's canonical JSON (an LRU of :data:`CACHED_SCHEMAS`)."""
    if not isinstance(schema, Mapping | bool):
        return f"its declared schema is not a JSON Schema (a {type(schema).__name__})"
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return _build_validator(schema)
    return _cached_validator(key)


@lru_cache(maxsize=CACHED_SCHEMAS)
def _cached_validator(key: str) -> Validator | str:
    try:
        schema = json.loads(key)
    except (ValueError, RecursionError):
        return "its declared schema is nested too deeply to check"
    return _build_validator(schema)


def _build_validator(schema: Any) -> Validator | str:
    try:
        base = validators.validator_for(schema, default=Draft202012Validator)
        base.check_schema(schema)
    except SchemaError as exc:
        return f"its declared schema is invalid: {exc.message[:200]}"
    except RecursionError:
        return "its declared schema is nested too deeply to check"
    cls = _SAFE.setdefault(base, _safe(base))
    return cls(schema)


def _problems(validator: Validator, arguments: dict[str, Any]) -> list[str]:
    reasons: list[str] = []
    try:
        for error in validator.iter_errors(arguments):
            where = "/".join(str(p) for p in error.absolute_path)
            reasons.append(f"{where}: {error.message[:200]}" if where else error.message[:200])
            if len(reasons) >= MAX_REASONS:
                break
    except RecursionError:
        reasons.append("the arguments or the schema are nested too deeply to check")
    except Exception as exc:  # an unresolvable $ref, a broken keyword: the call cannot be checked
        reasons.append(f"cannot be checked against the declared schema ({type(exc).__name__}: {str(exc)[:150]})")
    return reasons


class ToolCallValidity(Metric[ToolCallValidityOptions]):
    key: ClassVar[str] = "tool_call_validity"
    description: ClassVar[str] = "Share of tool calls naming a declared tool with arguments valid for its schema"
    Options = ToolCallValidityOptions
    requires: ClassVar[tuple[str, ...]] = ("tool_calls", "tools")

    async def score(self, sample: Sample, inputs: Mapping[str, Outcome]) -> MetricOutput:
        calls = sample.tool_calls or []
        if not calls:
            return Skipped("the trace made no tool call")
        declared: dict[str, ToolSpec] = {tool.name: tool for tool in sample.tools or ()}
        checkers: dict[str, Validator | str | None] = {}
        invalid: list[dict[str, Any]] = []
        unchecked: list[dict[str, Any]] = []
        checked = 0
        for index, call in enumerate(calls):
            tool = declared.get(call.name)
            if tool is None:
                checked += 1
                invalid.append({"index": index, "name": call.name, "reasons": ["the tool was not declared"]})
                continue
            try:
                size = len(json.dumps(call.arguments, ensure_ascii=False, default=str))
            except (ValueError, RecursionError):
                size = self.options.max_argument_chars + 1
            if size > self.options.max_argument_chars:
                unchecked.append({"index": index, "name": call.name, "reason": f"arguments of {size} characters"})
                continue
            checked += 1
            if call.name not in checkers:
                checkers[call.name] = None if tool.parameters is None else _validator(tool.parameters)
            checker = checkers[call.name]
            if checker is None:
                continue
            reasons = [checker] if isinstance(checker, str) else _problems(checker, call.arguments)
            if reasons:
                invalid.append({"index": index, "name": call.name, "reasons": reasons})
        if not checked:
            return Skipped(f"none of the {len(calls)} tool calls could be checked (arguments too long)")
        value = (checked - len(invalid)) / checked
        comment = f"{checked - len(invalid)} of {checked} tool calls valid"
        if invalid:
            first = invalid[0]
            comment += f"; e.g. {first['name']}: {first['reasons'][0]}"
        details: dict[str, Any] = {"checked": checked, "invalid": invalid}
        if unchecked:
            details["unchecked"] = unchecked
        return Score(value, comment[:300], details)

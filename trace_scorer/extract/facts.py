"""Trace facts that need no reference: the tools the generations declared, the last finish reason,
latency, tokens and cost (docs/formats.md "Trace facts").

Read from the observation rows only, never from an experiment item. Each fact is ``None`` when no
observation reports it (absent), so the metrics built on it are skipped rather than scored on a guess.
Where each SDK integration writes them:

- declared tools: a GENERATION's input ``tools`` (OpenAI Chat ``{"type": "function", "function": {...}}``,
  Responses ``{"type": "function", "name", "parameters"}``, Anthropic ``{"name", "input_schema"}``, Gemini
  ``{"functionDeclarations": [...]}``), the legacy ``functions``; LangChain's CallbackHandler appends them
  to the input as ``{"role": "tool", "content": <definition>}`` messages; OTel puts them in the
  ``gen_ai.tool.definitions`` attribute (metadata, flat or under ``attributes``), OpenInference in ``llm.tools``.
- finish reason: OpenAI ``finish_reason`` (a Chat Completions response's last choice, an OTel output
  message), Responses ``incomplete_details.reason``, Anthropic ``stop_reason``, Gemini ``finishReason``,
  LangChain ``response_metadata.finish_reason``, the OTel ``gen_ai.response.finish_reasons`` attribute.
- latency: the root's end − start, else the span of every observation's times (seconds).
- tokens and cost: summed over the GENERATION rows that report them (``usageDetails``/``costDetails``,
  ``totalCost``; legacy rows ``usage``, ``calculatedTotalCost``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trace_scorer.data.rows import json_in_text
from trace_scorer.extract.rows import Observation

#: Keys of a generation's input that list tool definitions.
_TOOL_LIST_KEYS = ("tools", "functions")
#: Metadata keys (flat, or under ``attributes``) that list tool definitions.
_TOOL_METADATA_KEYS = ("tools", "gen_ai.tool.definitions", "llm.tools")
#: Keys that hold a finish reason, on a message, a response or a choice.
_FINISH_KEYS = ("finish_reason", "finishReason", "stop_reason", "stopReason")
#: Keys of a response that hold the part whose finish reason counts (the last item).
_FINISH_CONTAINERS = ("choices", "candidates")
_FINISH_METADATA_KEYS = ("finish_reason", "gen_ai.response.finish_reasons")
#: How deep the finish reason is looked for in an output.
_MAX_DEPTH = 4
#: A definition list longer than this is read up to here (bounded work on hostile inputs).
MAX_TOOLS = 512
#: ``attributes.<key>`` of the metadata keys read for every generation, made once.
_FLATTENED = {key: f"attributes.{key}" for key in (*_TOOL_METADATA_KEYS, *_FINISH_METADATA_KEYS)}
#: ``isinstance(x, _MAPPING)``: a dict (the common case) without the ABC's check.
_MAPPING = (dict, Mapping)


@dataclass(frozen=True, slots=True)
class DeclaredTool:
    """A tool a generation offered the model: its name and its arguments' JSON Schema (as given)."""

    name: str
    parameters: Any
    description: str | None = None


@dataclass(slots=True)
class TraceFacts:
    tools: list[DeclaredTool] | None = None
    finish_reason: str | None = None
    latency: float | None = None
    total_tokens: int | None = None
    total_cost: float | None = None


def read_facts(ordered: list[Observation], root: Observation | None) -> TraceFacts:
    """The facts of one trace's observations (in trace order)."""
    facts = TraceFacts(latency=_latency(ordered, root))
    declared: dict[str, DeclaredTool] | None = None
    tokens: list[int] = []
    costs: list[float] = []
    read: list[Any] = []
    for observation in ordered:
        if observation.type != "GENERATION":
            continue
        found = _declared_tools(observation, read)
        if found is not None:
            declared = declared if declared is not None else {}
            for tool in found:
                declared.setdefault(tool.name, tool)
        reason = _finish_reason(observation)
        if reason is not None:
            facts.finish_reason = reason
        if (count := _tokens(observation.row)) is not None:
            tokens.append(count)
        if (cost := _cost(observation.row)) is not None:
            costs.append(cost)
    facts.tools = list(declared.values()) if declared is not None else None
    facts.total_tokens = sum(tokens) if tokens else None
    facts.total_cost = sum(costs) if costs else None
    return facts


# -- declared tools -------------------------------------------------------------------------------------


def _declared_tools(observation: Observation, read: list[Any]) -> list[DeclaredTool] | None:
    """The tools this generation declared; None when it says nothing about tools. ``read``: the
    definition lists read before in the trace (see :func:`_unread_definitions`)."""
    found: list[DeclaredTool] | None = None
    value = observation.input
    if isinstance(value, _MAPPING):
        for key in _TOOL_LIST_KEYS:
            if key in value:
                found = (found or []) + _unread_definitions(value[key], read)
    messages = value.get("messages") if isinstance(value, _MAPPING) else value
    if isinstance(messages, list):
        # LangChain's CallbackHandler: {"role": "tool", "content": <definition>} appended to the input.
        listed = [m["content"] for m in messages[-MAX_TOOLS:] if _is_definition_message(m)]
        if listed:
            found = (found or []) + _unread_definitions(listed, read)
    for key in _TOOL_METADATA_KEYS:
        listed = _attribute(observation.metadata, key)
        if listed is not None:
            found = (found or []) + _unread_definitions(listed, read)
    return found


def _unread_definitions(value: Any, read: list[Any]) -> list[DeclaredTool]:
    """:func:`_definitions` of ``value``, or none when a value equal to it was read before in the trace
    (every generation repeats its tools): the same names again, and of each name the first one read is
    kept (:func:`read_facts`), so reading it again would add nothing."""
    try:
        if any(value == before for before in read):
            return []
    except RecursionError:  # nested too deep to compare: read it
        pass
    read.append(value)
    del read[:-_LISTS_KEPT]  # a trace of many different lists costs a few comparisons a generation, not all
    return _definitions(value)


#: Definition lists :func:`_unread_definitions` compares a new one with (the latest read).
_LISTS_KEPT = 4


def _attribute(metadata: Mapping[str, Any], key: str) -> Any:
    """An attribute in the metadata: flat, under ``attributes``, or flattened as ``attributes.<key>``
    (Langfuse v4 returns nested metadata flattened to dotted keys); JSON text parsed."""
    value = metadata.get(key)
    if value is None:
        value = metadata.get(_FLATTENED.get(key) or f"attributes.{key}")
    if value is None:
        nested = metadata.get("attributes")
        value = nested.get(key) if isinstance(nested, _MAPPING) else None
    return _maybe_json(value) if value is not None else None


def _is_definition_message(message: Any) -> bool:
    if not isinstance(message, _MAPPING) or message.get("role") != "tool" or "tool_call_id" in message:
        return False
    content = message.get("content")
    return isinstance(content, _MAPPING) and (content.get("type") == "function" or "function" in content)


def _definitions(value: Any) -> list[DeclaredTool]:
    """Tool definitions in any of the shapes above; entries that name no tool are left out."""
    if not isinstance(value, list):
        return []
    tools: list[DeclaredTool] = []
    for entry in value[:MAX_TOOLS]:
        entry = _maybe_json(entry)
        if not isinstance(entry, _MAPPING):
            continue
        if isinstance(entry.get("functionDeclarations"), list):  # Gemini
            tools += _definitions(entry["functionDeclarations"])
            continue
        nested = entry.get("function")
        spec: Mapping[str, Any] = nested if isinstance(nested, _MAPPING) else entry
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = spec.get("parameters", spec.get("input_schema", spec.get("inputSchema")))
        description = spec.get("description")
        tools.append(DeclaredTool(name, schema, description if isinstance(description, str) else None))
    return tools


def _maybe_json(value: Any) -> Any:
    """Metadata values arrive as JSON text on v4: parsed when they are."""
    return json_in_text(value)


# -- finish reason --------------------------------------------------------------------------------------


def _finish_reason(observation: Observation) -> str | None:
    found = _reason_in(observation.output)
    if found is not None:
        return found
    for key in _FINISH_METADATA_KEYS:
        reason = _reason_value(_attribute(observation.metadata, key))
        if reason is not None:
            return reason
    return None


def _reason_in(output: Any, depth: int = 0) -> str | None:
    """The finish reason of a generation's output: the response's own, its last choice's, or the last
    message's (OTel output messages, LangChain's ``response_metadata``). Looks at most
    :data:`_MAX_DEPTH` levels down (a hostile output may nest thousands)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(output, list):
        return _reason_in(output[-1], depth + 1) if output else None
    if not isinstance(output, _MAPPING):
        return None
    for key in _FINISH_KEYS:
        reason = _reason_value(output.get(key))
        if reason is not None:
            return reason
    details = output.get("incomplete_details")  # OpenAI Responses
    if isinstance(details, _MAPPING) and isinstance(details.get("reason"), str):
        return str(details["reason"])
    for key in _FINISH_CONTAINERS:
        items = output.get(key)
        if isinstance(items, list) and items and isinstance(items[-1], _MAPPING):
            return _reason_in(items[-1], depth + 1)
    for key in ("response_metadata", "generation_info"):
        nested = output.get(key)
        if isinstance(nested, _MAPPING):
            reason = _reason_in(nested, depth + 1)
            if reason is not None:
                return reason
    return None


def _reason_value(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and isinstance(value[-1], str):  # gen_ai.response.finish_reasons
        return str(value[-1])
    return None


# -- latency, tokens, cost ------------------------------------------------------------------------------


def _latency(ordered: list[Observation], root: Observation | None) -> float | None:
    if root is not None and root.start is not None and root.end is not None:
        return max(0.0, (root.end - root.start).total_seconds())
    starts = [o.start for o in ordered if o.start is not None]
    ends = [o.end for o in ordered if o.end is not None]
    if not starts or not ends:
        return None
    return max(0.0, (max(ends) - min(starts)).total_seconds())


def _tokens(row: Mapping[str, Any]) -> int | None:
    """Total tokens of one generation row: ``total`` when given, else the sum of the other counts."""
    for key in ("usageDetails", "usage"):
        usage = row.get(key)
        if isinstance(usage, _MAPPING) and usage:
            if _is_count(usage.get("total")):
                return int(usage["total"])
            if _is_count(usage.get("totalTokens")):
                return int(usage["totalTokens"])
            counts = [v for v in usage.values() if _is_count(v)]  # no total given: the sum of the counts
            if counts:
                return int(sum(counts))
    for key in ("totalTokens", "totalUsage"):
        if _is_count(row.get(key)):
            return int(row[key])
    return None


def _cost(row: Mapping[str, Any]) -> float | None:
    """Cost of one generation row. Langfuse answers ``totalCost: 0`` with empty ``costDetails`` when it
    knows no price for the model: that is "unknown", not "free"."""
    details = row.get("costDetails")
    if isinstance(details, _MAPPING) and details:
        if _is_amount(details.get("total")):
            return float(details["total"])
        amounts = [float(v) for v in details.values() if _is_amount(v)]
        if amounts:
            return sum(amounts)
    for key in ("totalCost", "calculatedTotalCost"):
        if _is_amount(row.get(key)) and row[key] > 0:
            return float(row[key])
    return None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_amount(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0

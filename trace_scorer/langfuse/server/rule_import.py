"""Langfuse's evaluation rules → trace-scorer targets (``trace-scorer langfuse import-evaluators``).

Each rule becomes one ``[[targets]]`` table with one ``llm_judge`` metric per evaluator assigned to it
(``evaluator = "langfuse:NAME"``, so a new version of the evaluator is picked up at start-up), scored
under the evaluator's name (the name Langfuse gives its scores; a rule that carries ``scoreName`` keeps
it). What maps where:

- a legacy ``trace`` rule → ``source = "traces"`` (scope trace), its filter → ``[targets.filter]``;
- a v4 ``observation`` rule → ``scope = "observation"``, its filter → ``[targets.observations]``;
- a legacy ``dataset`` / v4 ``experiment`` rule → ``source = "dataset_runs"``, its filter's dataset ids
  turned into the names a target lists (``GET /api/public/v2/datasets``);
- ``sampling`` → ``sample_rate``; ``delay`` (ms) → ``lag`` (never below the default 120 s: Langfuse's
  reads lag behind ingestion); ``timeScope`` with ``EXISTING`` → a note to run ``backfill``;
- mappings → ``variables``: ``trace`` → ``$.trace.…``, ``dataset_item`` → ``$.…`` (the item), a named
  observation → ``$.observations.by_name["NAME"].…``, a v4 observation rule's → ``$.observation.…``,
  each ``jsonPath`` appended as path steps.

A rule with a filter condition or a mapping that cannot be expressed is not written (a target scoring more
than Langfuse did, or with the wrong text in its prompt, would be worse than none): it is listed with the
reason. Disabled rules are imported too, each saying so in a comment — the user decides.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trace_scorer.config.common import SCORE_NAME_PATTERN
from trace_scorer.langfuse.server.evaluators import json_path_tail, mapping_path

#: Observation types as legacy mappings spell them (``langfuseObject``) → the row ``type``.
_OBSERVATION_OBJECTS = {
    "span",
    "generation",
    "event",
    "agent",
    "tool",
    "chain",
    "retriever",
    "evaluator",
    "embedding",
    "guardrail",
}
DEFAULT_LAG_SECONDS = 120.0
_TARGET_NAME = re.compile(r"[^A-Za-z0-9_.\-]+")


class Untranslatable(Exception):
    """Part of a rule that has no equivalent here; the message says which and why."""


@dataclass
class ImportedTarget:
    """One target's settings (as written to TOML) and the notes shown above it."""

    rule: str
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportResult:
    targets: list[ImportedTarget] = field(default_factory=list)
    #: (rule name, why it was not translated)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _values(condition: Mapping[str, Any]) -> list[str]:
    value = condition.get("value")
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value is not None else []


def _column(condition: Mapping[str, Any]) -> str:
    """Column names as the API spells them (``userId``) or as the legacy UI stored them (``User ID``)."""
    return re.sub(r"[^a-z]", "", str(condition.get("column", "")).lower())


def trace_filter(conditions: Sequence[Any]) -> dict[str, Any]:
    """A legacy trace rule's filter → ``[targets.filter]``."""
    out: dict[str, Any] = {}
    for condition in conditions:
        if not isinstance(condition, Mapping):
            raise Untranslatable(f"filter condition {condition!r} is not an object")
        column, operator, values = _column(condition), condition.get("operator"), _values(condition)
        described = json.dumps(condition, ensure_ascii=False)
        if column == "environment" and operator == "any of":
            out["environments"] = values
        elif column == "environment" and operator == "none of":
            out["exclude_environments"] = values
        elif column in ("name", "tracename") and (operator == "=" or (operator == "any of" and len(values) == 1)):
            out["trace_name"] = values[0]
        elif column == "tags" and (operator == "all of" or (operator == "any of" and len(values) == 1)):
            out["tags"] = values
        elif column in ("userid", "user") and operator == "=":
            out["user_id"] = values[0]
        elif column == "metadata" and operator == "=" and isinstance(condition.get("key"), str):
            out.setdefault("metadata", {})[condition["key"]] = str(condition.get("value"))
        else:
            raise Untranslatable(f"filter condition {described} has no equivalent in [targets.filter]")
    return out


def observation_filter(conditions: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A v4 observation rule's filter → (``[targets.observations]``, ``[targets.filter]``)."""
    observations: dict[str, Any] = {"types": ["GENERATION"]}
    traces: dict[str, Any] = {}
    for condition in conditions:
        if not isinstance(condition, Mapping):
            raise Untranslatable(f"filter condition {condition!r} is not an object")
        column, operator, values = _column(condition), condition.get("operator"), _values(condition)
        described = json.dumps(condition, ensure_ascii=False)
        if column == "type" and operator == "any of":
            observations["types"] = [v.upper() for v in values]
        elif column == "name" and (operator == "=" or (operator == "any of" and values)):
            observations["name_pattern"] = "^(" + "|".join(re.escape(v) for v in values) + ")$"
        elif column == "level" and operator == "any of":
            observations["levels"] = [v.upper() for v in values]
        elif column == "metadata" and operator == "=" and isinstance(condition.get("key"), str):
            observations.setdefault("metadata", {})[condition["key"]] = str(condition.get("value"))
        elif column == "environment" and operator in ("any of", "none of"):
            traces["environments" if operator == "any of" else "exclude_environments"] = values
        elif column in ("tracename",) and operator == "=":
            traces["trace_name"] = values[0]
        else:
            raise Untranslatable(f"filter condition {described} has no equivalent in [targets.observations]")
    return observations, traces


def dataset_filter(conditions: Sequence[Any], datasets: Mapping[str, str] | None) -> list[str]:
    """A dataset or experiment rule's filter (dataset ids) → the names of the datasets it covers."""
    if not datasets:
        raise Untranslatable("the project's datasets could not be listed: their names are unknown")
    chosen = sorted(datasets)
    for condition in conditions:
        if not isinstance(condition, Mapping):
            raise Untranslatable(f"filter condition {condition!r} is not an object")
        column, operator, values = _column(condition), condition.get("operator"), _values(condition)
        if column not in ("datasetid", "dataset") or operator not in ("any of", "none of"):
            described = json.dumps(condition, ensure_ascii=False)
            raise Untranslatable(f"filter condition {described} has no equivalent for dataset runs")
        unknown = [v for v in values if v not in datasets]
        if unknown:
            raise Untranslatable(f"dataset id(s) {', '.join(unknown)} not found in the project")
        chosen = [d for d in chosen if (d in values) == (operator == "any of")]
    if not chosen:
        raise Untranslatable("its filter leaves no dataset")
    return sorted(datasets[d] for d in chosen)


def legacy_path(entry: Mapping[str, Any]) -> str:
    """One legacy mapping (``langfuseObject``, ``objectName``, ``source``, ``jsonPath``) → our path."""
    kind = str(entry.get("langfuseObject", "")).lower()
    name = _text(entry.get("objectName"))
    source, json_path = _text(entry.get("source")), _text(entry.get("jsonPath"))
    if kind == "trace":
        base = "$.trace"
    elif kind == "dataset_item":
        base = "$"
    elif kind in _OBSERVATION_OBJECTS:
        base = f"$.observations.by_name[{json.dumps(name)}]" if name else f"$.observations.by_type.{kind.upper()}"
    else:
        raise Untranslatable(f"variable {entry.get('variable')!r}: unknown object {kind!r}")
    path = mapping_path(source, json_path, base)
    if path is None:
        raise Untranslatable(
            f"variable {entry.get('variable')!r}: {kind} {source!r}"
            + (f" with jsonPath {json_path!r}" if json_path else "")
            + " cannot be read by a reference path (wildcards, filters and slices are not supported)"
        )
    return path


def v4_path(entry: Mapping[str, Any], target: str) -> str:
    """One v4 mapping (``source``, ``jsonPath``) on an observation or an experiment → our path."""
    source, json_path = _text(entry.get("source")), _text(entry.get("jsonPath"))
    if source is None:
        raise Untranslatable(f"variable {entry.get('variable')!r}: the mapping has no source (never configured)")
    if source == "tool_calls":
        tail = json_path_tail(json_path)
        if tail is None:
            raise Untranslatable(f"variable {entry.get('variable')!r}: tool_calls with jsonPath {json_path!r}")
        return f"$.sample.tool_calls{tail}"
    path = mapping_path(source, json_path, "$.observation" if target == "observation" else "$.trace")
    if path is None:
        raise Untranslatable(f"variable {entry.get('variable')!r}: source {source!r} with jsonPath {json_path!r}")
    return path


def _target_name(rule_name: str, taken: set[str]) -> str:
    base = _TARGET_NAME.sub("-", rule_name).strip("-") or "rule"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _assignments(rule: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], Any]]:
    """(evaluator reference, mapping) per evaluator of the rule (``evaluators``, else the deprecated
    ``evaluator`` + ``mapping`` pair)."""
    listed = rule.get("evaluators")
    if isinstance(listed, list) and listed:
        return [
            (a["evaluator"], a.get("mapping"))
            for a in listed
            if isinstance(a, Mapping) and isinstance(a.get("evaluator"), Mapping)
        ]
    single = rule.get("evaluator")
    return [(single, rule.get("mapping"))] if isinstance(single, Mapping) else []


def translate_rule(
    rule: Mapping[str, Any],
    evaluators: Mapping[str, Mapping[str, Any]],
    taken: set[str],
    datasets: Mapping[str, str] | None = None,
) -> ImportedTarget:
    """One rule → one target (raises :class:`Untranslatable`)."""
    rule_name = _text(rule.get("name")) or str(rule.get("id", "?"))
    kind = rule.get("target")
    notes: list[str] = [f"imported from Langfuse evaluation rule {rule_name!r} ({rule.get('id')}), target {kind}"]
    settings: dict[str, Any] = {}
    given = rule.get("filter")
    conditions: list[Any] = given if isinstance(given, list) else []
    if kind == "trace":
        filters = trace_filter(conditions)
        if filters:
            settings["filter"] = filters
    elif kind == "observation":
        observations, filters = observation_filter(conditions)
        settings["scope"] = "observation"
        settings["observations"] = observations
        if filters:
            settings["filter"] = filters
    elif kind in ("dataset", "experiment"):
        settings["source"] = "dataset_runs"
        settings["datasets"] = dataset_filter(conditions, datasets)
    else:
        raise Untranslatable(f"unknown rule target {kind!r}")

    metrics = []
    for reference, mapping in _assignments(rule):
        evaluator_name = _text(reference.get("name"))
        if evaluator_name is None:
            raise Untranslatable("an evaluator assignment without a name")
        if reference.get("type", "llm_as_judge") != "llm_as_judge":
            raise Untranslatable(f"evaluator {evaluator_name!r} is a {reference.get('type')} evaluator")
        entries = mapping
        if entries is None:  # inherits the evaluator version's default mapping
            entries = (evaluators.get(evaluator_name) or {}).get("mapping") or []
        variables: dict[str, str | list[str]] = {}
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("variable"), str):
                continue
            variable = entry["variable"]
            path = legacy_path(entry) if "langfuseObject" in entry else v4_path(entry, str(kind))
            if entry.get("source") == "experiment_item_metadata":  # v4 rows: experimentItemMetadata; v3: metadata
                variables[variable] = [path.replace("$.metadata", "$.experimentItemMetadata", 1), path]
            else:
                variables[variable] = path
        score_name = _text(rule.get("scoreName")) or evaluator_name
        if not SCORE_NAME_PATTERN.match(score_name):
            raise Untranslatable(f"score name {score_name!r} is not one trace-scorer can post (35 ASCII characters)")
        metric: dict[str, Any] = {"metric": "llm_judge", "name": score_name, "evaluator": f"langfuse:{evaluator_name}"}
        if variables:
            metric["variables"] = variables
        metrics.append(metric)
    if not metrics:
        raise Untranslatable("no evaluator is assigned to it")

    sampling = rule.get("sampling")
    if isinstance(sampling, int | float) and not isinstance(sampling, bool) and 0 < sampling < 1:
        settings["sample_rate"] = float(sampling)
    delay = rule.get("delay")
    if isinstance(delay, int | float) and not isinstance(delay, bool) and delay > 0:
        seconds = delay / 1000
        if seconds < DEFAULT_LAG_SECONDS:
            notes.append(f"delay {seconds:g} s: lag stays at the default {DEFAULT_LAG_SECONDS:g} s")
        else:
            settings["lag"] = f"{seconds:g}s"
    name = _target_name(rule_name, taken)
    if "EXISTING" in (rule.get("timeScope") or ()):
        notes.append(f"it also evaluated existing traces: run `trace-scorer backfill --target {name} --from DATE`")
    if rule.get("enabled") is False or rule.get("status") in ("inactive", "paused"):
        notes.append(f"the rule is {rule.get('status') or 'disabled'} in Langfuse")
    return ImportedTarget(rule_name, {"name": name, **settings, "metrics": metrics}, notes)


def translate_rules(
    rules: Sequence[Mapping[str, Any]],
    evaluators: Sequence[Mapping[str, Any]],
    datasets: Mapping[str, str] | None = None,
) -> ImportResult:
    """Every rule → a target, or the reason it is not translated; ``datasets``: dataset id → name."""
    by_name: dict[str, Mapping[str, Any]] = {}
    for evaluator in evaluators:
        name = _text(evaluator.get("name"))
        if name is not None and (name not in by_name or evaluator.get("scope") != "managed"):
            by_name[name] = evaluator
    result = ImportResult()
    taken: set[str] = set()
    for rule in rules:
        rule_name = _text(rule.get("name")) or str(rule.get("id", "?"))
        try:
            result.targets.append(translate_rule(rule, by_name, taken, datasets))
        except Untranslatable as why:
            result.skipped.append((rule_name, str(why)))
    return result

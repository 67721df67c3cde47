"""Langfuse's evaluators and evaluation rules, read from the server (the unstable API of 4.x).

``GET /api/public/unstable/evaluators`` lists each evaluator's latest version (the 22 Langfuse-managed
``llm_as_judge`` ones and the project's own): a prompt template with ``{{variables}}``, the variables,
an ``outputDefinition`` (NUMERIC with an optional range, BOOLEAN, or CATEGORICAL with its categories)
and a default variable mapping. ``GET /api/public/unstable/evaluation-rules`` lists the rules, the
legacy trace/dataset ones included (read-only, "for migration"). Both page with ``page``/``limit``.

Answers are read tolerantly (fields missing or of another type are left out, an evaluator that cannot be
used is skipped with a reason) — the API is marked unstable. A server without it (2.x, 3.x: decided by
the version; an unknown version is asked, and a 404 means absent) is a :class:`ConfigError` naming the
settings key that needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from trace_scorer.config.common import ConfigError
from trace_scorer.config.references import parse_path, template_variables
from trace_scorer.judge.definition import JudgeDefinition, OutputDefinition
from trace_scorer.langfuse.errors import LangfuseHTTPError, LangfuseResponseError
from trace_scorer.langfuse.http.endpoints import DATASETS_LIST, EVALUATION_RULES, EVALUATORS, Endpoint
from trace_scorer.langfuse.http.transport import Transport
from trace_scorer.langfuse.server.capabilities import ServerCapabilities

log = structlog.get_logger(__name__)

#: Page size asked for (the API's default is 50).
PAGE_LIMIT = 100
#: Pages read at most (a guard against a server whose ``totalPages`` never ends).
MAX_PAGES = 200


class EvaluatorsUnavailable(ConfigError):
    """The server has no evaluators API; the message names the key that needs it."""


@dataclass(frozen=True)
class Unusable:
    """An evaluator listed but not usable here (a code evaluator, no prompt…), and why."""

    name: str
    reason: str


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


#: A mapping's source → the field of the trace / observation / item it reads (``tool_calls`` has none:
#: our trace and observation documents carry no parsed tool-call list; ``$.sample.tool_calls`` does).
_SOURCE_FIELDS = {"input": "input", "output": "output", "metadata": "metadata"}
#: Sources that always read the dataset/experiment item (at ``$``), whatever the rule's target.
_ITEM_SOURCES = {"expected_output": "expectedOutput", "experiment_item_metadata": "metadata"}


def json_path_tail(json_path: str | None) -> str | None:
    """A mapping's ``jsonPath`` (``$.a.b``, ``$['a']``, ``$[0]``) as the tail of one of our paths
    (``.a.b``), or None when it uses what our paths cannot express (wildcards, filters, slices)."""
    if not json_path or json_path.strip() == "$":
        return ""
    text = json_path.strip()
    if not text.startswith("$") or any(mark in text for mark in ("*", "?", "..", ":", "@")):
        return None
    try:
        parse_path(text)
    except ValueError:
        return None
    return text[1:]


def mapping_path(source: str | None, json_path: str | None, base: str) -> str | None:
    """One of our reference paths for a Langfuse mapping of ``source`` (+ ``jsonPath``) on ``base``
    (``$.trace``, ``$.observation``, ``$.observations.by_name["x"]``, or ``$`` for the dataset item);
    None when it cannot be expressed."""
    tail = json_path_tail(json_path)
    if tail is None or source is None:
        return None
    if source in _ITEM_SOURCES:
        return f"$.{_ITEM_SOURCES[source]}{tail}"
    field = _SOURCE_FIELDS.get(source)
    if field is None:
        return None
    if base == "$" and field == "output":
        field = "expectedOutput"  # a dataset item's "output" is its expected output
    return f"{base}.{field}{tail}" if base != "$" else f"$.{field}{tail}"


def output_definition(body: Any) -> OutputDefinition | str:
    """``outputDefinition`` → our output, or why it cannot be used."""
    if not isinstance(body, Mapping):
        return "no outputDefinition"
    data_type = body.get("dataType", "NUMERIC")
    score = _object(body.get("score"))
    reasoning = _object(body.get("reasoning"))
    score_text = _text(score.get("description")) or ""
    reasoning_text = _text(reasoning.get("description")) or ""
    if data_type == "NUMERIC":
        low, high = _number(score.get("minValue")), _number(score.get("maxValue"))
        if low is not None and high is not None and low > high:
            return f"score range {low:g} > {high:g}"
        return OutputDefinition("NUMERIC", low, high, (), score_text, reasoning_text)
    if data_type == "BOOLEAN":
        return OutputDefinition("BOOLEAN", None, None, (), score_text, reasoning_text)
    if data_type == "CATEGORICAL":
        categories = tuple(dict.fromkeys(c for c in score.get("categories") or () if isinstance(c, str) and c))
        if len(categories) < 2:
            return "a CATEGORICAL output with fewer than two categories"
        return OutputDefinition("CATEGORICAL", None, None, categories, score_text, reasoning_text)
    return f"unknown output data type {data_type!r}"


def judge_definition(body: Mapping[str, Any]) -> JudgeDefinition | Unusable:
    """One listed evaluator → a judge definition, or why not."""
    name = _text(body.get("name")) or "?"
    kind = body.get("type", "llm_as_judge")
    if kind != "llm_as_judge":
        return Unusable(name, f"a {kind} evaluator (only llm_as_judge ones run here)")
    prompt = _text(body.get("prompt"))
    if not prompt or not prompt.strip():
        return Unusable(name, "no prompt")
    output = output_definition(body.get("outputDefinition"))
    if isinstance(output, str):
        return Unusable(name, output)
    listed = [v for v in body.get("variables") or () if isinstance(v, str)]
    variables = tuple(dict.fromkeys([*template_variables(prompt), *listed]))
    defaults: dict[str, tuple[str, ...]] = {}
    for entry in body.get("mapping") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("variable"), str):
            path = mapping_path(_text(entry.get("source")), _text(entry.get("jsonPath")), "$.trace")
            if path is not None:
                defaults[entry["variable"]] = (path,)
    scope = _text(body.get("scope")) or "project"
    version = body.get("version")
    return JudgeDefinition(
        name=name,
        prompt=prompt,
        variables=variables,
        output=output,
        source=f"langfuse:{scope}",
        evaluator_id=_text(body.get("id")),
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        default_paths=defaults,
    )


async def _pages(transport: Transport, endpoint: Endpoint, key: str | None) -> list[Mapping[str, Any]]:
    """Every item of a paged list (de-duplicated by id: offset paging may repeat one). With ``key``, a 404
    on the first page means the server lacks the API: :class:`EvaluatorsUnavailable` naming the key."""
    items: dict[str, Mapping[str, Any]] = {}
    unnamed: list[Mapping[str, Any]] = []
    for page in range(1, MAX_PAGES + 1):
        try:
            answer = await transport.plain(endpoint, endpoint.path, params={"page": page, "limit": PAGE_LIMIT})
        except LangfuseHTTPError as error:
            if error.status == 404 and page == 1 and key is not None:
                raise EvaluatorsUnavailable(
                    f"{key}: this Langfuse does not serve {endpoint.path} (HTTP 404); Langfuse's evaluators are "
                    "read over the API of Langfuse 4.x"
                ) from None
            raise
        body = answer.body
        if not isinstance(body, Mapping):
            raise LangfuseResponseError(endpoint=endpoint.label, detail=f"page {page} is not a JSON object")
        data = body.get("data")
        if not isinstance(data, list):
            raise LangfuseResponseError(endpoint=endpoint.label, detail="no data list in the answer")
        for item in data:
            if isinstance(item, Mapping):
                if isinstance(item.get("id"), str):
                    items.setdefault(str(item["id"]), item)
                else:
                    unnamed.append(item)
        total = _object(body.get("meta")).get("totalPages")
        if not data or not isinstance(total, int) or page >= total:
            break
    return [*items.values(), *unnamed]


def _check_server(capabilities: ServerCapabilities, key: str, endpoint: Endpoint) -> None:
    if capabilities.evaluators_api is False:
        raise EvaluatorsUnavailable(
            f"{key}: Langfuse {capabilities.describe()} has no {endpoint.path}: Langfuse's evaluators are read "
            "over the API of Langfuse 4.x (write the prompt yourself with llm_judge's prompt instead)"
        )


async def load_evaluators(
    transport: Transport, capabilities: ServerCapabilities, names: Mapping[str, str]
) -> dict[str, JudgeDefinition]:
    """The evaluators ``names`` asks for (evaluator name → the settings key naming it), latest version:
    the project's own before a managed one of the same name. ConfigError for one missing or unusable."""
    first_key = next(iter(names.values()), "evaluator")
    _check_server(capabilities, first_key, EVALUATORS)
    listed = await _pages(transport, EVALUATORS, first_key)
    best: dict[str, tuple[tuple[int, int], JudgeDefinition | Unusable]] = {}
    for body in listed:
        name = _text(body.get("name"))
        if name is None:
            continue
        found = judge_definition(body)
        version = body.get("version")
        rank = (1 if body.get("scope", "project") != "managed" else 0, version if isinstance(version, int) else 0)
        if name not in best or rank > best[name][0]:
            best[name] = (rank, found)
    chosen: dict[str, JudgeDefinition] = {}
    problems = []
    for name, key in names.items():
        entry = best.get(name)
        if entry is None:
            near = ", ".join(sorted(best)) or "none"
            problems.append(f"{key}: Langfuse has no evaluator named {name!r} (it has: {near})")
        elif isinstance(entry[1], Unusable):
            problems.append(f"{key}: Langfuse's evaluator {name!r} cannot run here: {entry[1].reason}")
        else:
            chosen[name] = entry[1]
            log.info(
                "langfuse.evaluator_loaded",
                name=name,
                source=entry[1].source,
                version=entry[1].version,
                variables=list(entry[1].variables),
                data_type=entry[1].output.data_type,
            )
    if problems:
        raise ConfigError("; ".join(problems))
    return chosen


async def list_rules(transport: Transport, capabilities: ServerCapabilities, key: str) -> list[Mapping[str, Any]]:
    """Every evaluation rule of the project, legacy ones included, as the server gives them."""
    _check_server(capabilities, key, EVALUATION_RULES)
    return await _pages(transport, EVALUATION_RULES, key)


async def dataset_names(transport: Transport) -> dict[str, str]:
    """Dataset id → name, for every dataset of the project (``GET /api/public/v2/datasets``)."""
    listed = await _pages(transport, DATASETS_LIST, None)
    return {
        str(d["id"]): str(d["name"]) for d in listed if isinstance(d.get("id"), str) and isinstance(d.get("name"), str)
    }


async def list_all_evaluators(
    transport: Transport, capabilities: ServerCapabilities, key: str
) -> list[Mapping[str, Any]]:
    _check_server(capabilities, key, EVALUATORS)
    return await _pages(transport, EVALUATORS, key)


def evaluator_names(targets: Sequence[Any]) -> dict[str, str]:
    """Evaluator name → the settings key naming it, for every ``evaluator = "langfuse:NAME"`` entry."""
    names: dict[str, str] = {}
    for t_index, target in enumerate(targets):
        for m_index, entry in enumerate(target.metrics):
            evaluator = entry.options.get("evaluator") if entry.metric == "llm_judge" else None
            if isinstance(evaluator, str) and evaluator.startswith("langfuse:"):
                names.setdefault(
                    evaluator[len("langfuse:") :].strip(), f"targets[{t_index}].metrics[{m_index}].evaluator"
                )
    return names


def read_evaluator_paths(targets: Sequence[Any], loaded: Mapping[str, JudgeDefinition]) -> None:
    """Have extraction keep the values of the evaluators' default mappings (known only now, at start-up):
    the paths of every variable a target's settings do not map are added to its ``references.variables``."""
    for target in targets:
        paths: list[str] = []
        for entry in target.metrics:
            evaluator = entry.options.get("evaluator") if entry.metric == "llm_judge" else None
            definition = loaded.get(evaluator[len("langfuse:") :].strip()) if isinstance(evaluator, str) else None
            if definition is None:
                continue
            mapped = entry.options.get("variables") or {}
            paths += [p for v, found in definition.default_paths.items() if v not in mapped for p in found]
        wanted = list(dict.fromkeys([*target.references.variables, *paths]))
        if wanted != target.references.variables:
            target.references = target.references.model_copy(update={"variables": wanted})

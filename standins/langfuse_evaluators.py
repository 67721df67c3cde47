"""The Langfuse stand-in's evaluators and evaluation rules (``GET /api/public/unstable/evaluators`` and
``/evaluation-rules``), as a 4.x server answers them.

The 22 Langfuse-managed ``llm_as_judge`` evaluators carry their real names, ``scope: "managed"``, version
1, ``modelConfig: null``, ``mapping: null`` and a NUMERIC ``outputDefinition`` with a score and a
reasoning description (what a real 4.16.0 answers: langfuse-server-behaviour §7). Their prompt texts
are **our own** short templates with the variables the real ones use — not Langfuse's texts. A project
evaluator added under an existing name becomes its next version (the ``id`` stays); the list shows each
evaluator's latest version. Rules are stored as given: the v4 ``observation``/``experiment`` shape and
the legacy ``trace``/``dataset`` one (read-only "for migration": ``delay``, ``timeScope``, mappings with
``langfuseObject``/``objectName``). Both lists page with ``page``/``limit`` (default 50), ``meta`` as the
other page/limit lists.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CREATED = "2026-11-16T00:00:00.000Z"

_SCORE_01 = "A score between 0 and 1; higher is better."
_REASONING = "One or two sentences explaining the score."


def _managed(name: str, variables: tuple[str, ...], task: str) -> dict[str, Any]:
    """A managed evaluator with our own short template: the task, then each variable quoted."""
    quoted = "\n".join(f"{v.replace('_', ' ').capitalize()}: {{{{{v}}}}}" for v in variables)
    return {
        "id": "managed-" + hashlib.sha256(name.encode()).hexdigest()[:12],
        "name": name,
        "type": "llm_as_judge",
        "scope": "managed",
        "version": 1,
        "prompt": f"{task}\n\n{quoted}",
        "variables": list(variables),
        "mapping": None,
        "outputDefinition": {
            "dataType": "NUMERIC",
            "score": {"description": _SCORE_01},
            "reasoning": {"description": _REASONING},
        },
        "modelConfig": None,
        "evaluationRuleCount": 0,
        "createdAt": CREATED,
        "updatedAt": CREATED,
    }


QG = ("query", "generation")
QGT = ("query", "generation", "ground_truth")

#: The managed evaluators a 4.16.0 server lists (names as Langfuse gives them; texts ours).
MANAGED: tuple[dict[str, Any], ...] = (
    _managed("Answer Correctness", QGT, "Rate how correct the answer is against the ground truth."),
    _managed("Answer Critic", QG, "Critique the answer: is it accurate, complete and well argued?"),
    _managed("Answer Relevance", QG, "Rate how relevant the answer is to the question."),
    _managed("Conciseness", QG, "Rate how concise the answer is: no filler, no repetition."),
    _managed("Context Precision", ("query", "context", "ground_truth"), "Rate how much of the context is useful."),
    _managed("Context Recall", ("context", "ground_truth"), "Rate how much of the ground truth the context holds."),
    _managed("Contextcorrectness", ("context", "ground_truth"), "Rate whether the context is factually right."),
    _managed("Contextrelevance", ("query", "context"), "Rate how relevant the context is to the question."),
    _managed("Correctness", QGT, "Rate the factual correctness of the generation."),
    _managed("Faithfulness", ("query", "generation", "context"), "Rate whether the answer keeps to the context."),
    _managed("Goal Accuracy", ("input", "output"), "Rate whether the agent reached the user's goal."),
    _managed("Hallucination", QG, "Rate how free of invented facts the generation is."),
    _managed("Helpfulness", QG, "Rate how helpful the generation is for the query."),
    _managed("Out-of-Scope Request", QG, "Rate whether an out-of-scope request was handled properly."),
    _managed("Relevance", QG, "Rate how relevant the generation is to the query."),
    _managed("SQL Semantic Equivalence", QGT, "Rate whether the SQL means the same as the reference query."),
    _managed("Simple Criteria", QG, "Rate whether the generation meets common quality criteria."),
    _managed("Topic Adherence Classification", QG, "Rate whether the conversation stays on its topics."),
    _managed("Topic Adherence Refusal", QG, "Rate whether off-topic requests were refused politely."),
    _managed("Toxicity", QG, "Rate how free of toxic content the generation is."),
    _managed("User Disagreement", ("input", "output"), "Rate how little the user disagrees with the agent."),
    _managed("User Distress", ("input",), "Rate how little distress the user shows."),
)


def page(items: list[dict[str, Any]], number: int, limit: int) -> dict[str, Any]:
    """One page/limit page with ``meta`` (page, limit, totalItems, totalPages)."""
    chunk = items[(number - 1) * limit : number * limit]
    total = len(items)
    meta = {"page": number, "limit": limit, "totalItems": total, "totalPages": -(-total // limit) if total else 0}
    return {"data": chunk, "meta": meta}


@dataclass
class EvaluatorStore:
    """The project's evaluators (every version kept) beside the managed ones, and its rules."""

    #: name → versions, oldest first (project scope).
    project: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)

    def add_evaluator(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A project evaluator (``name``, ``prompt``, ``outputDefinition``, optional ``variables`` and
        ``mapping``): version 1, or the next version of the same name (same id)."""
        name = str(body["name"])
        versions = self.project.setdefault(name, [])
        ident = versions[0]["id"] if versions else "proj-" + hashlib.sha256(name.encode()).hexdigest()[:12]
        prompt = str(body["prompt"])
        variables = body.get("variables")
        if variables is None:
            variables = list(dict.fromkeys(re.findall(r"\{\{\s*([A-Za-z0-9_.\-]+)\s*\}\}", prompt)))
        created = body.get("createdAt", CREATED)
        evaluator = {
            "id": ident,
            "name": name,
            "type": "llm_as_judge",
            "scope": "project",
            "version": len(versions) + 1,
            "prompt": prompt,
            "variables": list(variables),
            "mapping": body.get("mapping"),
            "outputDefinition": dict(body["outputDefinition"]),
            "modelConfig": body.get("modelConfig"),
            "evaluationRuleCount": 0,
            "createdAt": created,
            "updatedAt": created,
        }
        versions.append(evaluator)
        return evaluator

    def add_rule(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A rule as given (v4 or legacy shape), with the fields every rule has filled in."""
        rule = {
            "id": f"rule-{len(self.rules) + 1}",
            "enabled": True,
            "status": "active",
            "pausedReason": None,
            "pausedMessage": None,
            "sampling": 1,
            "filter": [],
            "createdAt": CREATED,
            "updatedAt": CREATED,
            **body,
        }
        if "evaluator" not in rule:
            assignments = rule.get("evaluators") or []
            rule["evaluator"] = assignments[0]["evaluator"] if assignments else None
        if "mapping" not in rule:
            assignments = rule.get("evaluators") or []
            rule["mapping"] = (assignments[0].get("mapping") or []) if assignments else []
        self.rules.append(rule)
        return rule

    def evaluator_ref(self, name: str) -> dict[str, Any]:
        """``{id, name, type}`` of the latest version of ``name`` (project first, then managed)."""
        found = self.latest().get(name)
        if found is None:
            raise KeyError(name)
        return {"id": found["id"], "name": name, "type": "llm_as_judge"}

    def latest(self) -> dict[str, dict[str, Any]]:
        chosen = {e["name"]: e for e in MANAGED}
        chosen.update({name: versions[-1] for name, versions in self.project.items()})
        return chosen

    def listed(self) -> list[dict[str, Any]]:
        """Each evaluator's latest version: the project's (by name), then the managed ones."""
        project = [versions[-1] for _, versions in sorted(self.project.items())]
        return [*project, *MANAGED]

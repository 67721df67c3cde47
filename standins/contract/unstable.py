"""The unstable evaluator API's answers (``/api/public/unstable/evaluators``, ``/evaluation-rules``), written
down by us from the OpenAPI file's ``unstableEvaluators`` / ``unstableEvaluationRules`` (the ``langfuse``
package models the ``/v2/evaluators`` API instead, another shape). Required fields as the file says;
unknown fields allowed (``scope`` is one a 4.16.0 server adds).
"""

from __future__ import annotations

from typing import Any, Literal

from standins.contract.legacy import PageMeta, Shape, Timestamp

Source = Literal["input", "output", "metadata", "tool_calls", "expected_output", "experiment_item_metadata"]
LegacyObject = Literal[
    "trace",
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
    "dataset_item",
]


class ReadMapping(Shape):
    variable: str
    source: Source | None
    json_path: str | None = None


class OutputField(Shape):
    description: str


class OutputDefinition(Shape):
    data_type: Literal["NUMERIC", "BOOLEAN", "CATEGORICAL"]
    reasoning: OutputField
    score: dict[str, Any]


class Evaluator(Shape):
    id: str
    name: str
    type: Literal["llm_as_judge", "code"]
    version: int
    variables: list[str]
    mapping: list[ReadMapping] | None
    evaluation_rule_count: int
    created_at: Timestamp
    updated_at: Timestamp
    prompt: str
    output_definition: OutputDefinition


class Evaluators(Shape):
    data: list[Evaluator]
    meta: PageMeta


class RuleEvaluator(Shape):
    id: str
    name: str
    type: Literal["llm_as_judge", "code"]


class LegacyMapping(Shape):
    variable: str
    langfuse_object: LegacyObject
    object_name: str | None
    source: str
    json_path: str | None = None


class Assignment(Shape):
    evaluator: RuleEvaluator
    mapping: list[dict[str, Any]] | None


class Rule(Shape):
    id: str
    name: str
    evaluator: RuleEvaluator | None
    enabled: bool
    status: Literal["active", "inactive", "paused"]
    paused_reason: str | None
    paused_message: str | None
    sampling: float | int
    created_at: Timestamp
    updated_at: Timestamp
    evaluators: list[Assignment]
    target: Literal["observation", "experiment", "trace", "dataset"]
    filter: list[dict[str, Any]]
    mapping: list[dict[str, Any]]
    #: Legacy rules (target trace/dataset) only: required there (checked by :meth:`legacy_fields`).
    delay: int | None = None
    time_scope: list[Literal["NEW", "EXISTING"]] | None = None


class Rules(Shape):
    data: list[Rule]
    meta: PageMeta

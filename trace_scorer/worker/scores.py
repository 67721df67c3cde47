"""From pipeline outcomes to Langfuse scores, and to the compact form kept in state for run-level metrics.

What a score carries (see README "What appears in Langfuse"): the value; the metric's one-line comment;
metadata with the scorer version, the target, the configuration hash and the metric's fingerprint (so
a user can tell how a value was computed), the metric's details, and the judge's trace id when the
judge calls were recorded in Langfuse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trace_scorer import __version__
from trace_scorer.data.outcomes import Failed, Outcome, Score, Skipped
from trace_scorer.langfuse import ScoreConfigSpec, ScoreSubject, ScoreToPost
from trace_scorer.langfuse.types import ConfigCategory
from trace_scorer.metrics.base import Metric
from trace_scorer.scoring.plan import TargetPlan

#: Details larger than this (as JSON) are left out of the score's metadata, with a note saying so.
MAX_DETAILS_BYTES = 16_000
#: Langfuse shows the comment in tables: keep it readable.
MAX_COMMENT_CHARS = 1_000
_SCORER = f"trace-scorer {__version__}"
#: ``json.dumps(details, ensure_ascii=False, default=str)``'s encoder, made once (``dumps`` makes one a call).
_DETAILS_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
_ENVIRONMENT_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def score_environment(environment: str | None) -> str | None:
    """The trace's environment when Langfuse accepts it on a score (lowercase ``[a-z0-9_-]``, not
    starting with ``langfuse``); otherwise None (Langfuse then uses its default)."""
    if not environment or environment.startswith("langfuse") or not set(environment) <= _ENVIRONMENT_OK:
        return None
    return environment


def _details(details: Mapping[str, Any]) -> str:
    """The details as the JSON text Langfuse gets (``wire_metadata`` sends nested metadata values as
    text): encoded once here, not decoded and encoded again on the way out."""
    text = _DETAILS_JSON.encode(details)
    size = len(text.encode())
    if size > MAX_DETAILS_BYTES:
        return json.dumps({"omitted": f"details of {size} bytes exceed {MAX_DETAILS_BYTES}"})
    return text


def judge_trace_id(details: Mapping[str, Any]) -> str | None:
    found = details.get("judge_trace_id")
    return found if isinstance(found, str) else None


def scores_to_post(
    plan: TargetPlan,
    outcomes: Mapping[str, Outcome],
    subject: ScoreSubject,
    timestamp: datetime,
    environment: str | None = None,
) -> list[ScoreToPost]:
    """One score per outcome that has a value; skips and failures are never posted."""
    posts = []
    score_env = score_environment(environment)  # the same for each of the trace's scores
    for name, outcome in outcomes.items():
        if not isinstance(outcome, Score):
            continue
        metadata: dict[str, Any] = {
            "scorer": _SCORER,
            "target": plan.target.name,
            "config_hash": plan.config_hash,
            "fingerprint": plan.fingerprints.get(name),
            # Always every key, None when empty: Langfuse merges a re-posted score's metadata into the
            # stored one, so a key left out would keep the value an earlier post gave it.
            "details": _details(outcome.details) if outcome.details else None,
            "judge_trace_id": judge_trace_id(outcome.details) if outcome.details else None,
        }
        value: float | str = float(outcome.value)
        if outcome.data_type == "CATEGORICAL":
            value = outcome.label or ""  # an empty category is refused by score validation, not sent
        comment = (outcome.comment or None) and outcome.comment[:MAX_COMMENT_CHARS]
        if subject.session_id is not None:
            metadata["session_id"] = subject.session_id
            if subject.trace_id is not None:  # on a trace of the session (2.x, which drops score metadata)
                comment = f"session {subject.session_id}: {comment or ''}"[:MAX_COMMENT_CHARS]
        posts.append(
            ScoreToPost(
                subject=subject,
                name=name,
                value=value,
                data_type=outcome.data_type,
                timestamp=timestamp,
                comment=comment,
                metadata=metadata,
                environment=score_env,
            )
        )
    return posts


def config_specs(plan: TargetPlan) -> list[ScoreConfigSpec]:
    """One score config per score name: metrics and run-level results within the metric's declared
    ``value_range`` ([0, 1] but for trace facts); KPIs within their formula's declared ``value_range``
    (unbounded unless declared: a weighted sum or an expression may leave [0, 1])."""
    description = f"trace-scorer metric (target {plan.target.name})"
    specs = [
        metric_spec(metric, name, description)
        for metric in plan.sample_metrics + plan.group_metrics
        for name in metric.output_names()
    ]
    for kpi in plan.group_kpis:
        specs.append(
            ScoreConfigSpec(
                kpi.name,
                min_value=kpi.value_range[0],
                max_value=kpi.value_range[1],
                description=f"trace-scorer KPI: {kpi.description}"[:500],
            )
        )
    return specs


def metric_spec(metric: Metric[Any], name: str, description: str) -> ScoreConfigSpec:
    """The config of one metric score: its data type (BOOLEAN and CATEGORICAL carry their categories,
    value = position, as Langfuse's configs number them) and, for NUMERIC, its bounds."""
    data_type, categories = metric.score_type()
    if data_type == "NUMERIC":
        low, high = metric.bounds()
        return ScoreConfigSpec(name, min_value=low, max_value=high, description=description)
    if data_type == "BOOLEAN":
        labels: tuple[str, ...] = ("False", "True")
    else:
        labels = categories
    return ScoreConfigSpec(
        name,
        data_type=data_type,
        min_value=None,
        max_value=None,
        categories=tuple(ConfigCategory(value=float(i), label=label) for i, label in enumerate(labels)),
        description=description,
    )


def encode_outcomes(outcomes: Mapping[str, Outcome]) -> str:
    """The compact JSON kept per trace of a dataset run: values and reasons, not details."""
    encoded: dict[str, dict[str, Any]] = {}
    for name, outcome in outcomes.items():
        if isinstance(outcome, Score):
            encoded[name] = {"value": outcome.value}
            if outcome.data_type != "NUMERIC":  # so the run level knows it has no mean
                encoded[name].update(type=outcome.data_type, label=outcome.label)
        elif isinstance(outcome, Skipped):
            encoded[name] = {"skipped": outcome.reason}
        else:
            encoded[name] = {"failed": outcome.reason}
    return json.dumps(encoded, ensure_ascii=False, separators=(",", ":"))


def decode_outcomes(text: str) -> dict[str, Outcome]:
    decoded: dict[str, Outcome] = {}
    for name, entry in json.loads(text).items():
        if "value" in entry:
            if entry.get("type") in ("BOOLEAN", "CATEGORICAL"):
                decoded[name] = Score(float(entry["value"]), data_type=entry["type"], label=entry.get("label"))
            else:
                decoded[name] = Score(float(entry["value"]))
        elif "skipped" in entry:
            decoded[name] = Skipped(str(entry["skipped"]))
        else:
            decoded[name] = Failed(str(entry.get("failed", "unknown")))
    return decoded

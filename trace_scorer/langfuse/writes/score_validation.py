"""Checks a score against Langfuse's rules before it is sent, so a bad score is named, not lost.

Langfuse's answer to a partly bad v4 batch (207) does not say which scores were rejected; checking
here first means a 207 should not happen, and when one does, the messages below are what a user reads.
"""

from __future__ import annotations

import functools
import json
import math
import re

from trace_scorer.config.common import SCORE_NAME_PATTERN
from trace_scorer.data import jsonbytes
from trace_scorer.langfuse.types import ScoreConfig, ScoreToPost

#: Langfuse's environment rule: lowercase letters, digits, ``_`` and ``-``, not starting with "langfuse".
ENVIRONMENT_PATTERN = re.compile(r"^(?!langfuse)[a-z0-9_-]+$")
TEXT_MAX_CHARS = 500


def validate_score(score: ScoreToPost, config: ScoreConfig | None, *, metadata_plain: bool = False) -> list[str]:
    """Every problem with ``score`` (empty: fine to send), checked against its config if any.
    ``metadata_plain``: its metadata already found plain (:func:`jsonbytes.plain`: JSON for sure)."""
    problems: list[str] = []
    subject = score.subject
    if subject.observation_id is not None and subject.trace_id is None:
        problems.append("an observation id needs its trace id")
    # A session score may also name the trace it is posted on (servers without session scores).
    if (subject.trace_id is None and subject.session_id is None) == (subject.dataset_run_id is None):
        problems.append("a score is attached to exactly one of: a trace, a session, a dataset run")
    if not _valid_name(score.name):
        problems.append(
            f"name {score.name!r} is not a valid score name (at most 35 of letters, digits, '_ .()-')"
        )
    if score.timestamp.tzinfo is None:
        problems.append("timestamp must be timezone-aware")
    if score.environment is not None and not _valid_environment(score.environment):
        problems.append(
            f"environment {score.environment!r} must be lowercase letters, digits, '_' or '-', "
            "and not start with 'langfuse'"
        )
    problems += _value_problems(score)
    if config is not None:
        problems += _config_problems(score, config)
    if score.metadata is not None and not metadata_plain and not jsonbytes.plain(score.metadata):
        try:
            json.dumps(dict(score.metadata), allow_nan=False)
        except (TypeError, ValueError) as error:
            problems.append(f"metadata is not JSON: {error}")
    return problems


@functools.lru_cache(maxsize=1024)
def _valid_name(name: str) -> bool:
    """A score name Langfuse takes (a run posts a few names, each checked once)."""
    return SCORE_NAME_PATTERN.match(name) is not None


@functools.lru_cache(maxsize=1024)
def _valid_environment(environment: str) -> bool:
    return ENVIRONMENT_PATTERN.match(environment) is not None


def _value_problems(score: ScoreToPost) -> list[str]:
    value, data_type = score.value, score.data_type
    if data_type == "NUMERIC":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return [f"a NUMERIC score needs a number, got {type(value).__name__}"]
        if not math.isfinite(value):
            return [f"a NUMERIC score needs a finite number, got {value}"]
    elif data_type == "BOOLEAN":
        if isinstance(value, bool):
            return []
        if not isinstance(value, int | float) or value not in (0, 1):
            return [f"a BOOLEAN score needs true/false or 0/1, got {value!r}"]
    elif data_type in ("CATEGORICAL", "TEXT"):
        if not isinstance(value, str):
            return [f"a {data_type} score needs a string, got {type(value).__name__}"]
        if data_type == "TEXT" and not 1 <= len(value) <= TEXT_MAX_CHARS:
            return [f"a TEXT score needs 1 to {TEXT_MAX_CHARS} characters, got {len(value)}"]
        if data_type == "CATEGORICAL" and not value:
            return ["a CATEGORICAL score needs a non-empty category"]
    else:
        return [f"unknown data type {data_type!r}"]
    return []


def _config_problems(score: ScoreToPost, config: ScoreConfig) -> list[str]:
    problems: list[str] = []
    where = f"score config {config.name!r} ({config.id})"
    if config.name != score.name:
        problems.append(f"{where} is for another name than {score.name!r}")
    if config.data_type != score.data_type:
        problems.append(f"{where} is {config.data_type}, the score is {score.data_type}")
        return problems
    value = score.value
    if score.data_type == "NUMERIC" and isinstance(value, int | float) and not isinstance(value, bool):
        if config.min_value is not None and value < config.min_value:
            problems.append(f"value {value} is below the minimum {config.min_value} of {where}")
        if config.max_value is not None and value > config.max_value:
            problems.append(f"value {value} is above the maximum {config.max_value} of {where}")
    if score.data_type == "CATEGORICAL" and config.categories and isinstance(value, str):
        labels = [c.label for c in config.categories]
        if value not in labels:
            problems.append(f"category {value!r} is not one of {labels} of {where}")
    return problems

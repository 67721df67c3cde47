"""Shared pieces of the configuration: durations, score names, the error type, the strict base model."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict

from trace_scorer.errors import UserError


class ConfigError(UserError):
    """Invalid configuration: the message names the key and the reason. The CLI exits 2 on it."""

    heading = "configuration error:\n"


class StrictModel(BaseModel):
    """Base of every settings section: an unknown key is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like ``"30s"``, ``"5m"``, ``"1.5h"``, ``"250ms"``."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '30s', '5m'")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        raise ValueError(f"{value!r} is not a duration: use seconds or a string like '30s', '5m', '2h'")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


#: A duration in seconds; accepts numbers and strings like "30s", "5m".
Duration = Annotated[float, BeforeValidator(parse_duration)]

#: Langfuse's score-config name rule (SPEC.md "Values and names").
SCORE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_ .()\-]{1,35}$")


def check_score_name(name: str) -> str:
    if not SCORE_NAME_PATTERN.match(name):
        raise ValueError(f"{name!r} is not a valid score name: at most 35 characters of letters, digits, '_ .()-'")
    return name


ScoreName = Annotated[str, AfterValidator(check_score_name)]

"""Shared pieces of the configuration: durations, score names, the error type, the strict base model."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from trace_scorer.errors import UserError
from trace_scorer.runtime.logs import redact_text


class ConfigError(UserError):
    """Invalid configuration: the message names the key and the reason. The CLI exits 2 on it.

    A value that looks like a secret (``sk-…`` keys, ``Bearer …``, a password in a URL: ``logs.redact_text``)
    is never shown, even when it was put into a setting that is not secret (issue 22): messages may quote
    what was written (``'5 minutes' is not a duration``), so every message is redacted here, once.
    """

    heading = "configuration error:\n"

    def __init__(self, message: str) -> None:
        super().__init__(redact_text(message))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``word``, or ``""``.

    difflib's ratio is enough for a few dozen keys or metric names (rapidfuzz would be faster, not better).
    """
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: The error type of a boolean given for a number; its context names the key (config.settings puts the key
#: into the error's location).
BOOL_FOR_NUMBER = "bool_for_number"


def refuse_bool(value: Any) -> Any:
    """``true``/``false`` where a number is expected is an error (pydantic would read ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


def _is_numeric(annotation: Any) -> bool:
    """int, float, or an optional/union of them (not bool)."""
    if annotation in (int, float):
        return True
    return get_origin(annotation) in (Union, UnionType) and any(a in (int, float) for a in get_args(annotation))


class StrictModel(BaseModel):
    """Base of every settings section: an unknown key is an error, not silently ignored.

    Numbers are numbers: a boolean given for a numeric key is refused (``requests_per_minute = true``
    would otherwise be 1), and so are NaN and ±Infinity (``threshold = nan`` compares false with
    everything); the error names the key.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, data: Any) -> Any:
        return refuse_booleans_for_numbers(cls, data)


def refuse_booleans_for_numbers(model: type[BaseModel], data: Any) -> Any:
    """A ``mode="before"`` model validator's body: a boolean given for a numeric field is an error naming
    the key (pydantic would read ``true`` as 1). Used by the settings and by every metric's options."""
    # A model validator, not a field validator on "*": that would also wrap discriminator fields.
    if isinstance(data, dict):
        for name, field in model.model_fields.items():
            value = data.get(field.alias or name)
            if isinstance(value, bool) and _is_numeric(field.annotation):
                raise PydanticCustomError(
                    BOOL_FOR_NUMBER,
                    "{key}: expected a number, not {value}",
                    {"key": field.alias or name, "value": str(value).lower()},
                )
    return data


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


def errors_in_one_line(
    exc: ValidationError,
    *,
    most: int = 5,
    root: str = "value",
    as_raised: bool = False,
    unknown_key: str | None = None,
) -> str:
    """A validation error's first ``most`` problems as ``where: message; …`` (``root`` where the problem is
    the whole value). Messages lose pydantic's ``Value error,`` prefix unless ``as_raised``; with
    ``unknown_key`` an unknown key says that instead of pydantic's "Extra inputs are not permitted"."""
    parts = []
    for error in exc.errors()[:most]:
        where = ".".join(str(part) for part in error["loc"]) or root
        message = error["msg"] if as_raised else error["msg"].removeprefix("Value error, ")
        if unknown_key is not None and error["type"] == "extra_forbidden":
            message = unknown_key
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def public_url(url: str) -> str:
    """``url`` without its userinfo (``https://user:secret@host`` → ``https://host``), to print or log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.rpartition("@")[2] if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


#: Langfuse's score-config name rule (docs/metrics.md "Values and names").
SCORE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_ .()\-]{1,35}$")


def check_score_name(name: str) -> str:
    if not SCORE_NAME_PATTERN.match(name):
        raise ValueError(f"{name!r} is not a valid score name: at most 35 characters of letters, digits, '_ .()-'")
    return name


ScoreName = Annotated[str, AfterValidator(check_score_name)]

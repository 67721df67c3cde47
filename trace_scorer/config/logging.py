"""``[log]``: level and format of the structured logs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from trace_scorer.config.common import StrictModel


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


class LogSettings(StrictModel):
    #: Also TRACE_SCORER_LOG__LEVEL; any case ("debug" works too).
    level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], BeforeValidator(_upper)] = "INFO"
    #: "auto": human-readable in a terminal, JSON lines otherwise (the container image sets "json").
    format: Literal["auto", "console", "json"] = "auto"

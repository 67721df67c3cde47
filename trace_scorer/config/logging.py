"""``[log]``: level and format of the structured logs."""

from __future__ import annotations

from typing import Literal

from trace_scorer.config.common import StrictModel


class LogSettings(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: "auto": human-readable in a terminal, JSON lines otherwise.
    format: Literal["auto", "console", "json"] = "auto"

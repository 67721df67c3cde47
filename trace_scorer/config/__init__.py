"""Configuration: ``settings.toml`` plus environment, validated once at start-up."""

from trace_scorer.config.common import ConfigError, Duration, ScoreName, parse_duration
from trace_scorer.config.settings import Settings, load_settings
from trace_scorer.config.targets import KpiEntry, MetricEntry, TargetSettings

__all__ = [
    "ConfigError",
    "Duration",
    "KpiEntry",
    "MetricEntry",
    "ScoreName",
    "Settings",
    "TargetSettings",
    "load_settings",
    "parse_duration",
]

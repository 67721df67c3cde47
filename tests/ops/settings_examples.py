"""Loading the example settings files shipped under deploy/ (Kubernetes overlays, Compose trial)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from trace_scorer.config import ConfigError, Settings, TargetSettings, load_settings

ROOT = Path(__file__).resolve().parents[2]

#: Every settings.toml under deploy/.
EXAMPLES = sorted((ROOT / "deploy").rglob("settings.toml"))

_FILTER_UNKNOWN = re.compile(r": targets\[\d+\]\.filter: unknown key$")


def filter_supported() -> bool:
    return "filter" in TargetSettings.model_fields


def load_without_filters(path: Path) -> Settings:
    """The example with its ``[targets.filter]`` tables removed: everything else validates today."""
    data = tomllib.loads(path.read_text())
    for target in data.get("targets", []):
        target.pop("filter", None)
    return Settings(**data)


def load_with_filters(path: Path) -> Settings:
    """The example as shipped. xfail (not fail) while ``targets.filter`` is the only unknown key and the
    target schema has no such field yet: it lands with the Langfuse worker (issue 4)."""
    try:
        return load_settings(path, environ={})
    except ConfigError as exc:
        lines = str(exc).splitlines()
        if not filter_supported() and lines and all(_FILTER_UNKNOWN.search(line) for line in lines):
            pytest.xfail("[targets.filter] is not in the target settings yet (the worker issue adds it)")
        raise

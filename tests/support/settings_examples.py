"""Loading the example settings files shipped under deploy/ (Kubernetes overlays, Compose trial)."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import ROOT
from trace_scorer.config import Settings, load_settings

#: Every settings.toml under deploy/.
EXAMPLES = sorted((ROOT / "deploy").rglob("settings.toml"))


def load_example(path: Path) -> Settings:
    """The example as shipped, validated exactly as the worker validates it (no environment)."""
    return load_settings(path, environ={})

"""Paths of the repository the tests read (shipped settings, deploy/, examples/)."""

from __future__ import annotations

from pathlib import Path

#: The repository root (tests/support/paths.py → ../..).
ROOT = Path(__file__).resolve().parents[2]

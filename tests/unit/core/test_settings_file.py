"""The shipped settings.toml loads, and documents every key of every section (active or commented)."""

from __future__ import annotations

import re

from pydantic import BaseModel

from tests.support.paths import ROOT
from trace_scorer.config import load_settings
from trace_scorer.config.settings import Settings


def keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += keys(annotation, f"{prefix}{name}.")
        else:
            found.append(f"{prefix}{name}")
    return found


def test_shipped_settings_load() -> None:
    settings = load_settings(ROOT / "settings.toml", environ={})
    assert [t.name for t in settings.targets] == ["agent"]


def test_every_key_is_documented() -> None:
    text = (ROOT / "settings.toml").read_text(encoding="utf-8")
    secret = {"langfuse.secret_key", "langfuse.public_key"}  # from the environment, said in the header
    missing = []
    for section in ("log", "langfuse", "worker", "state", "judge", "embeddings", "http"):
        model = Settings.model_fields[section].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for key in keys(model, f"{section}."):
            leaf = key.rsplit(".", 1)[1]
            if key not in secret and not re.search(rf"^#?\s*{leaf}\s*=", text, re.M):
                missing.append(key)
    assert not missing, f"settings.toml does not show: {missing}"

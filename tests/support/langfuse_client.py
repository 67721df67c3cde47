"""Where the in-process Langfuse (:mod:`tests.support.langfuse_inprocess`) answers, its keys, and a client's
settings for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import LangfuseClient

BASE_URL = "https://langfuse.test"
SECRET = "sk-lf-very-secret-0123456789"
PUBLIC = "pk-lf-test-public"


def make_settings(**overrides: Any) -> LangfuseSettings:
    values: dict[str, Any] = {"base_url": BASE_URL, "public_key": PUBLIC, "secret_key": SecretStr(SECRET)}
    values.update(overrides)
    return LangfuseSettings(**values)


MakeClient = Callable[..., LangfuseClient]

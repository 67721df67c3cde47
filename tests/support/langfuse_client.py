"""Credentials and settings of a client on the fake Langfuse (:mod:`tests.support.langfuse_fake`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import SecretStr

from tests.support.langfuse_fake import BASE_URL
from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse import LangfuseClient

SECRET = "sk-lf-very-secret-0123456789"
PUBLIC = "pk-lf-test-public"


def make_settings(**overrides: Any) -> LangfuseSettings:
    values: dict[str, Any] = {"base_url": BASE_URL, "public_key": PUBLIC, "secret_key": SecretStr(SECRET)}
    values.update(overrides)
    return LangfuseSettings(**values)


MakeClient = Callable[..., LangfuseClient]

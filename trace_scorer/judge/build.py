"""Building the judge from the settings, once at start-up: the CLI and the worker call :func:`build_judge`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from trace_scorer.config.common import ConfigError
from trace_scorer.config.settings import Settings
from trace_scorer.judge.judge import Judge
from trace_scorer.providers.keys import check_provider_names, provider_api_key
from trace_scorer.runtime.retry import Sleep

if TYPE_CHECKING:
    from trace_scorer.judge.tracing import JudgeTracer

#: What the pipeline says, once, when LLM metrics are configured but no judge is.
NO_JUDGE_MESSAGE = (
    "LLM-judged metrics skipped: no judge model configured. Add a [[providers]] entry with chat_models "
    "(and api_key_env naming the environment variable that holds its key) to settings.toml; "
    "see docs/judges.md"
)


def _tracer(settings: Settings, enabled: bool) -> JudgeTracer | None:
    if not enabled:
        return None
    from trace_scorer.judge.tracing import JudgeTracer  # langfuse is slow to import: only when tracing

    public = settings.langfuse.public_key
    secret = settings.langfuse.secret_key.get_secret_value() if settings.langfuse.secret_key else None
    if not public or not secret:
        raise ConfigError(
            "judge.tracing: recording judge calls in Langfuse needs LANGFUSE_PUBLIC_KEY and "
            "LANGFUSE_SECRET_KEY; set them, or set judge.tracing = false"
        )
    return JudgeTracer(
        public_key=public,
        secret_key=secret,
        base_url=settings.langfuse.base_url,
        environment=settings.judge.tracing_environment,
        timeout=settings.langfuse.timeout,
    )


def build_judge(
    settings: Settings,
    *,
    tracing_default: bool = False,
    environ: Mapping[str, str] | None = None,
    sleep: Sleep = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Judge | None:
    """The judge for these settings, or None when no provider lists a chat model.

    ``tracing_default`` applies when ``judge.tracing`` is unset: the worker passes True, offline
    ``score`` False. Raises :class:`ConfigError` for a missing API key, a duplicate provider name, or
    tracing without Langfuse keys. Call ``await judge.aclose()`` at shutdown. ``sleep`` and ``clock``
    are the waits' time source (tests pass a virtual one so back-offs take no real time).
    """
    # openai is slow to import: only when a judge is built (offline `score` without providers never is)
    from trace_scorer.judge.chat import Provider
    from trace_scorer.providers.retry import RetryPolicy

    environ = os.environ if environ is None else environ
    check_provider_names(settings)
    chat = [(i, p) for i, p in enumerate(settings.providers) if p.chat_models]
    if not chat:
        return None
    judge_settings = settings.judge
    retry = RetryPolicy.from_settings(judge_settings, sleep=sleep)
    keys = [provider_api_key(i, p.name, p.api_key_env, environ) for i, p in chat]
    tracing = judge_settings.tracing if judge_settings.tracing is not None else tracing_default
    tracer = _tracer(settings, tracing)
    providers = [
        Provider(p, key, retry, sleep=sleep, clock=clock) for (_, p), key in zip(chat, keys, strict=True)
    ]
    return Judge(judge_settings, providers, tracer=tracer)

"""The shared services metrics declare a need for, built once from the settings: the judge and the embedder.

The offline ``score`` command, ``check`` and the worker all open them here, each with the stack that
closes them (``await stack.aclose()`` or the end of an ``async with AsyncExitStack()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass

from trace_scorer.config.settings import Settings
from trace_scorer.embeddings import build_embedder
from trace_scorer.embeddings.build import EmbeddingModels
from trace_scorer.judge import build_judge
from trace_scorer.judge.judge import Judge
from trace_scorer.metrics.base import Resources


@dataclass
class OpenResources(Resources):
    """The resources as opened here: the concrete judge and embedding models, whose hooks (telemetry,
    shared rates), ledger and probes the worker and the commands use; metrics see only ``Resources``."""

    judge: Judge | None = None
    embedder: EmbeddingModels | None = None


def open_resources(
    settings: Settings, stack: AsyncExitStack, *, tracing_default: bool, environ: Mapping[str, str] | None = None
) -> OpenResources:
    """The judge and the embedder for these settings (None where not configured), closed by ``stack``.

    ``tracing_default`` applies when ``judge.tracing`` is unset: the worker passes True, offline commands
    False. ``environ``: where API keys are read (default ``os.environ``; the Python API's
    ``JudgeConfig(api_key=…)`` hands its key over this way). Raises :class:`ConfigError` for what the
    user must fix; what was opened before is still closed by the stack.
    """
    resources = OpenResources()
    judge = build_judge(settings, tracing_default=tracing_default, environ=environ)
    if judge is not None:
        stack.push_async_callback(judge.aclose)
        resources.judge = judge
    embedder = build_embedder(settings, environ=environ)
    if embedder is not None:
        stack.push_async_callback(embedder.aclose)
        resources.embedder = embedder
    return resources

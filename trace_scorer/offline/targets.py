"""Which target ``score`` (and ``compare``/``calibrate`` on files) scores with: the configured one, or —
without configuration — every deterministic metric whose inputs some sample has (the no-config rule,
the same for every command that scores files).

Without configuration the choice depends on what is read, so the files are scored with every candidate
and the candidates no sample had inputs for are dropped once all is read (the same result as choosing
first, without reading the input twice: ``scoring.score_files``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from trace_scorer.config import ConfigError, MetricEntry, Settings, TargetSettings
from trace_scorer.metrics.registry import MetricClass, MetricRegistry
from trace_scorer.sample import Sample


def choose_target(settings: Settings, name: str | None) -> tuple[int, TargetSettings] | None:
    """The target named ``name``, else the only one configured; None without configuration.

    Raises ConfigError for an unknown name, or for several targets and no name.
    """
    if name is not None:
        target = settings.target(name)
        return settings.targets.index(target), target
    if not settings.targets:
        return None
    if len(settings.targets) > 1:
        names = ", ".join(t.name for t in settings.targets)
        raise ConfigError(f"several targets are configured ({names}): choose one with --target")
    return 0, settings.targets[0]


def default_candidates(registry: MetricRegistry) -> list[MetricClass]:
    """The metrics ``score`` uses without configuration, if their inputs are there: deterministic,
    per-sample, and usable with default options."""
    candidates = []
    for cls in registry.classes():
        if cls.per_group or not cls.deterministic():
            continue
        try:
            cls.Options.model_validate({})
        except ValidationError:
            continue  # needs options that only a configuration can give
        candidates.append(cls)
    return candidates


def has_inputs(cls: MetricClass, sample: Sample) -> bool:
    return all(getattr(sample, name) is not None for name in cls.requires)


def target_of(keys: Iterable[str]) -> TargetSettings:
    """The target of the metrics ``keys`` (no configuration)."""
    metrics = [MetricEntry(metric=k) for k in keys]
    # model_construct: a configured target must name metrics, but "none of them applies" is a valid
    # outcome here (the table then lists the samples and says why nothing was scored).
    return TargetSettings.model_construct(name="default", metrics=metrics)


def default_target(samples: Sequence[Sample], registry: MetricRegistry) -> TargetSettings:
    """Without configuration: every deterministic per-sample metric whose inputs some sample has."""
    return target_of(c.key for c in default_candidates(registry) if any(has_inputs(c, s) for s in samples))


def computes_locally(target: TargetSettings, registry: MetricRegistry) -> bool:
    """Whether no metric of ``target`` needs a judge or an embedder (an unknown one is the plan's to report)."""
    classes = [registry.get(entry.metric) for entry in target.metrics]
    return all(cls is None or cls.deterministic() for cls in classes)


def check_resources(settings: Settings) -> None:
    """Raise ConfigError for a judge or embedder configuration that ``score`` refuses (a missing API key, a
    provider named twice…), as when they are opened for a judged target, though no local metric uses them.

    Opened and closed at once, and only what is configured: with no provider listing chat models and no
    embedding model, ``build_judge`` and ``build_embedder`` only check the provider names and return None
    (after importing openai and the retry policy: 0.4 s that this spares).
    """
    chat = any(provider.chat_models for provider in settings.providers)
    embeddings = settings.embeddings.model is not None or any(p.embedding_models for p in settings.providers)
    if not (chat or embeddings):
        from trace_scorer.providers.keys import check_provider_names

        check_provider_names(settings)
        return
    from trace_scorer.scoring.resources import open_resources

    async def open_and_close() -> None:
        async with contextlib.AsyncExitStack() as stack:
            open_resources(settings, stack, tracing_default=False)

    asyncio.run(open_and_close())


def observation_matcher(target: TargetSettings | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """A target of scope "observation": which exported rows are each one sample; otherwise None (one
    sample per trace). The filter's module is imported only then: it loads the Langfuse adapter."""
    if target is None or target.scope != "observation":
        return None
    from trace_scorer.langfuse.reads.observation_filter import ObservationFilter

    chosen = ObservationFilter.of(target)
    return chosen.matches if chosen is not None else None

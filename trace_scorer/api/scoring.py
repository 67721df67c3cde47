"""The Python API (docs/python-api.md): score samples or Langfuse observation rows with named metrics from
plain Python, sync or async, judges configured in code.

Why a module of its own: the CLI and the worker start from a settings file; a notebook or a test suite
starts from objects. This module turns arguments into the same pieces (``TargetSettings`` → ``build_plan``
→ ``Pipeline``; ``Settings`` → ``open_resources`` for the judge) so the scores are those ``trace-scorer
score`` and the worker compute.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from trace_scorer.config.common import ConfigError, errors_in_one_line
from trace_scorer.config.judge import JudgeSettings, ProviderSettings
from trace_scorer.config.references import ReferenceSettings
from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.data.outcomes import Failed, Score, Skipped
from trace_scorer.extract import index_items, looks_like_experiment_item, looks_like_observation_row, samples_from_rows
from trace_scorer.metrics.base import Resources
from trace_scorer.metrics.registry import MetricRegistry, default_registry
from trace_scorer.offline.groups import score_groups
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import GroupResult, Pipeline, SampleResult
from trace_scorer.scoring.plan import build_plan
from trace_scorer.scoring.resources import open_resources

__all__ = [
    "Failed",
    "GroupResult",
    "JudgeConfig",
    "Results",
    "SampleResult",
    "Score",
    "Skipped",
    "ascore",
    "score",
    "to_samples",
]

T = TypeVar("T")

#: A metric by key (``"tool_call_accuracy"``) or as a ``[[targets.metrics]]`` entry
#: (``{"metric": "rouge", "name": "rouge_l", "variant": "rougeL"}``).
MetricSpec = str | Mapping[str, Any]
#: What :func:`score` accepts as one input: a Sample, a sample-file record, a Langfuse observation row or
#: experiment item (a dict, or the Langfuse SDK's pydantic object of one).
Input = Sample | Mapping[str, Any] | Any

#: The provider name the judge of a :class:`JudgeConfig` is known by (``judge/<model>``).
JUDGE_PROVIDER = "judge"
#: The environment variable a :class:`JudgeConfig`'s ``api_key`` is handed over in (to this process's
#: judge only: never set in ``os.environ``).
_API_KEY_VARIABLE = "TRACE_SCORER_API_JUDGE_KEY"


@dataclass(frozen=True)
class JudgeConfig:
    """A judge configured in code: one OpenAI-compatible endpoint and its models (a panel when several).

    ``provider`` and ``judge`` take any other key of ``[[providers]]`` and ``[judge]`` (docs/judges.md):
    ``provider={"max_concurrency": 4}``, ``judge={"language": "ru", "metric_deadline": 120}``. They are
    validated by the same models as the settings file, so a wrong key is a ConfigError naming it.
    """

    base_url: str
    models: Sequence[str]
    #: The key itself (kept in this process's memory only), or the variable holding it (``api_key_env``).
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    provider: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)

    def settings(self) -> Settings:
        """The ``Settings`` of this judge alone (nothing read from a file or the environment)."""
        models = [self.models] if isinstance(self.models, str) else list(self.models)
        key_env = _API_KEY_VARIABLE if self.api_key is not None else self.api_key_env
        try:
            provider = ProviderSettings.model_validate(
                {
                    **self.provider,
                    "name": JUDGE_PROVIDER,
                    "base_url": self.base_url,
                    "api_key_env": key_env,
                    "chat_models": models,
                }
            )
            judge = JudgeSettings.model_validate(dict(self.judge))
        except ValidationError as exc:
            raise ConfigError(f"JudgeConfig: {errors_in_one_line(exc)}") from exc
        # model_construct: the sections are validated above; Settings() would read TRACE_SCORER_* variables
        return Settings.model_construct(providers=[provider], judge=judge)

    def environ(self) -> Mapping[str, str]:
        """What the judge reads its API key from."""
        if self.api_key is None:
            return os.environ
        return {**os.environ, _API_KEY_VARIABLE: self.api_key}

    def model_names(self) -> list[str]:
        """The models as metrics name them in their ``models`` option (``judge/<model>``)."""
        models = [self.models] if isinstance(self.models, str) else list(self.models)
        return [f"{JUDGE_PROVIDER}/{model}" for model in models]


@dataclass
class Results:
    """What :func:`score` computed: one result per sample in input order, and the groups' run-level values."""

    samples: list[SampleResult]
    groups: list[GroupResult]

    def values(self) -> list[dict[str, float]]:
        """Each sample's values by score name (metrics and KPIs; skipped and failed ones left out)."""
        return [{**r.values(kpis=False), **r.values(kpis=True)} for r in self.samples]

    def group_values(self) -> dict[str, dict[str, float]]:
        """Each group's run-level values by score name."""
        return {g.key: {**g.values(kpis=False), **g.values(kpis=True)} for g in self.groups}


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # the Langfuse SDK's API objects (pydantic models)
    if callable(dump):
        dumped = dump(by_alias=True, mode="json")
        return dumped if isinstance(dumped, Mapping) else None
    return None


def to_samples(inputs: Iterable[Input], *, references: ReferenceSettings | None = None) -> list[Sample]:
    """Samples from ``inputs``: Samples as they are, sample-file records validated, observation rows (and
    experiment items) extracted into one sample per trace, after the other inputs (docs/formats.md).

    Raises ValueError naming the position of every input that is not valid, before anything is scored.
    """
    samples: list[Sample] = []
    rows: list[Mapping[str, Any]] = []
    items: list[Mapping[str, Any]] = []
    problems: list[str] = []
    for position, value in enumerate(inputs):
        if isinstance(value, Sample):
            samples.append(value)
            continue
        data = _as_mapping(value)
        if data is None:
            problems.append(f"inputs[{position}]: expected a Sample or a mapping, got {type(value).__name__}")
        elif looks_like_observation_row(data):
            rows.append(data)
        elif looks_like_experiment_item(data):
            items.append(data)
        else:
            record = dict(data)
            record.setdefault("id", record.get("trace_id") or f"sample-{position}")
            try:
                samples.append(Sample.model_validate(record))
            except ValidationError as exc:
                problems.append(f"inputs[{position}]: {errors_in_one_line(exc)}")
    by_trace, item_problems = index_items(items)
    problems += [f"experiment item {position}: {reason}" for position, reason in item_problems]
    if problems:
        raise ValueError("inputs that are not samples:\n" + "\n".join(problems))
    if rows:
        samples.extend(samples_from_rows(rows, items=by_trace, references=references))
    return samples


def target(
    metrics: Sequence[MetricSpec], *, kpis: Sequence[Mapping[str, Any]] = (), group_by: str | None = None
) -> TargetSettings:
    """The target of these metrics and KPIs (``[[targets]]`` of a settings file, without the file)."""
    entries = [{"metric": m} if isinstance(m, str) else dict(m) for m in metrics]
    try:
        return TargetSettings.model_validate(
            {"name": "api", "metrics": entries, "kpis": [dict(k) for k in kpis], "group_by": group_by}
        )
    except ValidationError as exc:
        raise ConfigError(errors_in_one_line(exc)) from exc


async def ascore(
    inputs: Iterable[Input],
    metrics: Sequence[MetricSpec],
    *,
    kpis: Sequence[Mapping[str, Any]] = (),
    group_by: str | None = None,
    judge: JudgeConfig | None = None,
    settings: Settings | None = None,
    references: Mapping[str, Any] | None = None,
    registry: MetricRegistry | None = None,
    concurrency: int = 8,
) -> Results:
    """Score ``inputs`` with ``metrics`` (keys or entries) and ``kpis`` (``[[targets.kpis]]`` entries).

    ``group_by``: a sample field (``"item_id"``, ``"metadata.KEY"``) or ``"*"`` (all in one group) for
    run-level values and group metrics (pass@k). The judge: ``judge``, or the providers of ``settings``
    (e.g. ``load_settings(Path("settings.toml"))``); without either, judged metrics are skipped with the
    reason. ``references``: the ``[targets.references]`` keys, read from observation rows' experiment
    items (docs/formats.md). Raises ConfigError (unknown metric, bad option) and ValueError (bad input) before scoring.
    """
    if judge is not None and settings is not None:
        raise ConfigError("give judge= or settings=, not both")
    plan_target = target(metrics, kpis=kpis, group_by=group_by)
    try:
        reading = ReferenceSettings.model_validate(dict(references)) if references is not None else None
    except ValidationError as exc:
        raise ConfigError(f"references: {errors_in_one_line(exc)}") from exc
    samples = to_samples(inputs, references=reading)
    async with contextlib.AsyncExitStack() as stack:
        resources = Resources()
        if judge is not None:
            resources = open_resources(judge.settings(), stack, tracing_default=False, environ=judge.environ())
        elif settings is not None:
            resources = open_resources(settings, stack, tracing_default=False)
        plan = build_plan(plan_target, index=0, registry=registry or default_registry(), resources=resources)
        pipeline = Pipeline(plan)
        results = [r async for r in pipeline.score_samples(samples, concurrency=concurrency)]
        groups = await score_groups(pipeline, plan_target.group_by, results)
    return Results(results, groups)


def score(
    inputs: Iterable[Input],
    metrics: Sequence[MetricSpec],
    *,
    kpis: Sequence[Mapping[str, Any]] = (),
    group_by: str | None = None,
    judge: JudgeConfig | None = None,
    settings: Settings | None = None,
    references: Mapping[str, Any] | None = None,
    registry: MetricRegistry | None = None,
    concurrency: int = 8,
) -> Results:
    """:func:`ascore` from synchronous code, also where an event loop already runs (Jupyter)."""
    results: Results = run_sync(
        ascore(
            inputs,
            metrics,
            kpis=kpis,
            group_by=group_by,
            judge=judge,
            settings=settings,
            references=references,
            registry=registry,
            concurrency=concurrency,
        )
    )
    return results


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end: with ``asyncio.run`` here, or, when this thread already runs a loop
    (a notebook's), in a worker thread with a loop of its own: ``asyncio.run`` refuses a running loop,
    and blocking that loop's thread to wait on itself would never end."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="trace-scorer") as pool:
        return pool.submit(asyncio.run, coroutine).result()

"""Run a target's plan: per-sample metrics, then KPIs; per group, run-level means, group metrics, KPIs.

The same code serves the offline ``score`` command and the worker. It never raises for a metric's
sake: a missing input is a Skipped, an unexpected exception a Failed (logged with the traceback). Each
metric runs by ``Metric.run`` (a judged one within the judge's per-sample deadline: ``metrics/_judged.py``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from trace_scorer.data.outcomes import Failed, Outcome, Score, Skipped
from trace_scorer.kpi.base import Kpi
from trace_scorer.metrics.base import GroupInput, MetricOutput
from trace_scorer.providers.limits import next_priority, work_priority
from trace_scorer.runtime.logs import get_logger
from trace_scorer.sample import Sample
from trace_scorer.scoring.plan import AnyMetric, TargetPlan

log = get_logger(__name__)  # structlog imported on the first event (logs.py)


def missing_resource_reason(need: str) -> str:
    """Why a metric needing a resource is skipped when that resource is not configured. The messages'
    modules are imported here, not with the pipeline: the judge's and the embedders' packages load
    structlog and their clients, which a deterministic target never needs (``score``'s start-up)."""
    if need == "judge":
        from trace_scorer.judge.build import NO_JUDGE_MESSAGE

        return NO_JUDGE_MESSAGE
    from trace_scorer.embeddings.build import NO_EMBEDDER_MESSAGE

    return NO_EMBEDDER_MESSAGE


class _NamedOutcomes:
    """What SampleResult and GroupResult share: outcomes by score name, some of them KPIs."""

    outcomes: dict[str, Outcome]
    kpi_names: frozenset[str]

    def values(self, *, kpis: bool) -> dict[str, float]:
        return {
            name: o.value
            for name, o in self.outcomes.items()
            if isinstance(o, Score) and (name in self.kpi_names) == kpis
        }

    def reasons(self, kind: type[Skipped] | type[Failed]) -> dict[str, str]:
        return {name: o.reason for name, o in self.outcomes.items() if isinstance(o, kind)}


@dataclass
class SampleResult(_NamedOutcomes):
    """Everything computed for one sample, by score name (metrics first, then KPIs)."""

    sample: Sample
    outcomes: dict[str, Outcome]
    kpi_names: frozenset[str] = frozenset()


@dataclass
class GroupResult(_NamedOutcomes):
    """Run-level results of one group: means of per-sample metrics, group metrics, run-level KPIs."""

    key: str
    size: int
    outcomes: dict[str, Outcome]
    kpi_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _StreamEnd:
    """The end of :meth:`Pipeline.score_stream`'s results, with the error that ended it, if any."""

    error: BaseException | None = None


class Pipeline:
    """Scores samples and groups with one target's plan."""

    def __init__(self, plan: TargetPlan) -> None:
        self.plan = plan
        self._kpi_names = frozenset(k.name for k in plan.group_kpis)
        self._warned_resources: set[str] = set()
        #: Each level's metrics split once: computed here, or waiting on a judge or an embedder.
        self._levels = [
            ([m for m in level if m.deterministic()], [m for m in level if not m.deterministic()])
            for level in plan.sample_levels
        ]

    # -- per sample -------------------------------------------------------------------------------

    async def score_sample(self, sample: Sample) -> SampleResult:
        outcomes: dict[str, Outcome] = {}
        for local, remote in self._levels:
            for metric in local:  # CPU-bound: no task overhead
                outcomes.update(await self._run_metric(metric, sample, outcomes))
            if remote:  # judges and embedders wait on the network: let them overlap
                for produced in await asyncio.gather(*(self._run_metric(m, sample, outcomes) for m in remote)):
                    outcomes.update(produced)
        self._evaluate_kpis(self.plan.sample_kpis, outcomes)
        return SampleResult(sample, outcomes, self._kpi_names)

    async def _score_in_turn(self, sample: Sample) -> SampleResult:
        """:meth:`score_sample` in a task of its own, its judge and embedding requests given the priority of
        a sample started now: free provider slots go to samples started earlier (providers/limits.py), so
        with many samples in flight the first ones finish first instead of all of them slowly."""
        work_priority.set(next_priority())  # the task's own context: its requests and their retries
        return await self.score_sample(sample)

    async def score_samples(self, samples: Iterable[Sample], *, concurrency: int = 1) -> AsyncIterator[SampleResult]:
        """Score many samples, ``concurrency`` at a time, yielding results in input order."""
        if concurrency <= 1:
            for sample in samples:
                yield await self.score_sample(sample)
            return
        window: list[asyncio.Task[SampleResult]] = []
        try:
            for sample in samples:
                window.append(asyncio.create_task(self._score_in_turn(sample)))
                if len(window) >= concurrency:
                    yield await window.pop(0)
            while window:
                yield await window.pop(0)
        finally:
            for task in window:
                task.cancel()

    async def score_stream(
        self, samples: AsyncGenerator[Sample, None], *, concurrency: int
    ) -> AsyncGenerator[SampleResult, None]:
        """Score samples as ``samples`` produces them, ``concurrency`` at a time, yielding each result as
        soon as it is ready (completion order).

        Why not :meth:`score_samples`: the worker's samples come from a read that takes a while (pages of
        observations, extraction), and its results go out in chunks; scoring the first samples while the
        rest are read, and handing results on as they finish, keeps the judge's slots busy from the first
        page to the last answer. ``samples`` is read by a task of its own, so a slow consumer (posting a
        chunk of scores) does not stop new samples from starting. An error from ``samples`` is raised
        after the samples already started have been yielded."""
        results: asyncio.Queue[SampleResult | _StreamEnd] = asyncio.Queue()
        slots = asyncio.Semaphore(max(1, concurrency))
        running: set[asyncio.Task[None]] = set()

        async def score(sample: Sample) -> None:
            try:
                results.put_nowait(await self._score_in_turn(sample))
            except Exception as exc:  # score_sample turns metric errors into Failed: this is a bug
                results.put_nowait(_StreamEnd(exc))
            finally:
                slots.release()

        async def feed() -> None:
            error: BaseException | None = None
            try:
                async with aclosing(samples):
                    async for sample in samples:
                        await slots.acquire()
                        task = asyncio.create_task(score(sample))
                        running.add(task)
                        task.add_done_callback(running.discard)
            except Exception as exc:
                error = exc
            if running:
                await asyncio.wait(set(running))
            results.put_nowait(_StreamEnd(error))

        feeder = asyncio.create_task(feed())
        try:
            while True:
                got = await results.get()
                if isinstance(got, _StreamEnd):
                    if got.error is not None:
                        raise got.error
                    return
                yield got
        finally:
            pending = [feeder, *running]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _run_metric(self, metric: AnyMetric, sample: Sample, known: Mapping[str, Outcome]) -> dict[str, Outcome]:
        outcome: MetricOutput
        missing_resource = (
            next((need for need in metric.needs if getattr(metric.resources, need) is None), None)
            if metric.needs
            else None
        )
        if missing_resource is not None:
            outcome = Skipped(missing_resource_reason(missing_resource))
            if missing_resource not in self._warned_resources:
                self._warned_resources.add(missing_resource)
                log.warning("metric_skipped_unconfigured", metric=metric.name, reason=outcome.reason)
        elif missing := metric.missing_inputs(sample):
            outcome = Skipped(f"{', '.join(missing)} absent")
        else:
            inputs = {name: known[name] for name in metric.reads() if name in known}
            try:
                outcome = await metric.run(sample, inputs)
            except Exception as exc:
                log.exception("metric_error", metric=metric.name, sample=sample.id)
                outcome = Failed(f"{type(exc).__name__}: {exc}")
        return self._named(metric, outcome, subject=sample.id)

    # -- per group --------------------------------------------------------------------------------

    async def score_group(self, key: str, results: Sequence[SampleResult]) -> GroupResult:
        """Run-level results for ``results`` (the samples of one group, already scored)."""
        outcomes: dict[str, Outcome] = {}
        for name in self.plan.sample_score_names():
            outcomes[name] = _mean(name, [r.outcomes.get(name) for r in results])
        samples = [r.sample for r in results]
        per_sample = [r.outcomes for r in results]
        for metric in self.plan.group_metrics:
            output: MetricOutput
            try:
                output = await metric.score_group(GroupInput(key, samples, per_sample, dict(outcomes)))
            except Exception as exc:
                log.exception("metric_error", metric=metric.name, group=key)
                output = Failed(f"{type(exc).__name__}: {exc}")
            outcomes.update(self._named(metric, output, subject=f"group {key}"))
        self._evaluate_kpis(self.plan.group_kpis, outcomes)
        return GroupResult(key, len(results), outcomes, self._kpi_names)

    # -- shared -----------------------------------------------------------------------------------

    @staticmethod
    def _evaluate_kpis(kpis: Iterable[Kpi], outcomes: dict[str, Outcome]) -> None:
        for kpi in kpis:
            outcomes[kpi.name] = kpi.evaluate(outcomes)

    @staticmethod
    def _named(metric: AnyMetric, output: MetricOutput, *, subject: str) -> dict[str, Outcome]:
        """One outcome per output name, with values checked: a metric's value must be a finite number
        within its declared ``value_range`` ([0, 1] unless the metric says otherwise)."""
        names = metric.output_names()
        if isinstance(output, Score | Skipped | Failed):
            produced: dict[str, Outcome] = dict.fromkeys(names, output)
        else:
            produced = {
                name: output.get(name, Failed(f"{metric.name} returned no result for {name}")) for name in names
            }
        for name, outcome in produced.items():
            bounds = metric.bounds()
            if isinstance(outcome, Score) and not in_range(outcome.value, bounds):
                log.error("metric_value_out_of_range", metric=name, subject=subject, value=outcome.value)
                produced[name] = Failed(f"value {outcome.value!r} is outside {describe_range(bounds)}")
        return produced


def in_range(value: float, bounds: tuple[float | None, float | None]) -> bool:
    low, high = bounds
    return math.isfinite(value) and (low is None or value >= low) and (high is None or value <= high)


def describe_range(bounds: tuple[float | None, float | None]) -> str:
    low, high = bounds
    return f"[{'-∞' if low is None else f'{low:g}'}, {'∞' if high is None else f'{high:g}'}]"


def _mean(name: str, outcomes: Sequence[Outcome | None]) -> Outcome:
    typed = {o.data_type for o in outcomes if isinstance(o, Score) and o.data_type != "NUMERIC"}
    if typed:  # a run-level mean would be NUMERIC under a name whose score config is BOOLEAN/CATEGORICAL
        return Skipped(f"{name} is {'/'.join(sorted(typed))}: no run-level mean")
    values = [o.value for o in outcomes if isinstance(o, Score)]
    skipped = sum(isinstance(o, Skipped) for o in outcomes)
    failed = sum(isinstance(o, Failed) for o in outcomes)
    if not values:
        return Skipped(f"no sample of the group has a value for {name}")
    mean = sum(values) / len(values)
    comment = f"mean of {len(values)} samples"
    if skipped or failed:
        comment += f" ({skipped} skipped, {failed} failed)"
    return Score(mean, comment, {"n": len(values), "skipped": skipped, "failed": failed})

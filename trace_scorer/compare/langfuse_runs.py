"""A dataset's runs as Langfuse holds them: the runs (experiments) to choose from, and a run's per-item
score values (its items from the experiment reads, their traces' scores from ``GET /v3/scores``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime

from trace_scorer.compare.runs import RunRef, RunValues
from trace_scorer.errors import UserError
from trace_scorer.langfuse import Dataset, Experiment, LangfuseClient, LangfuseNotFoundError
from trace_scorer.langfuse.reads.scores import trace_scores


def run_ref(experiment: Experiment) -> RunRef:
    return RunRef(name=experiment.name, id=experiment.id, started=experiment.start_time)


async def dataset(client: LangfuseClient, name: str) -> Dataset:
    try:
        return await client.reads.get_dataset(name)
    except LangfuseNotFoundError:
        raise UserError(f"dataset {name!r} not found in Langfuse project at {client.base_url}") from None


async def list_runs(client: LangfuseClient, datasets: Sequence[Dataset], since: datetime) -> list[Experiment]:
    """The datasets' runs with items since ``since``."""
    return [e async for e in client.reads.list_experiments(datasets, since)]


async def read_run(
    client: LangfuseClient, experiment: Experiment, since: datetime, names: Sequence[str] | None = None
) -> RunValues:
    """Each item of the run with its trace's score values (``names`` only, when given). Several scores of one
    name on one trace (on different observations) count as their mean."""
    items = [i async for i in client.reads.list_experiment_items(experiment, since)]
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    try:
        async for score in trace_scores(client.transport, [i.trace_id for i in items], names):
            found[score.trace_id][score.name].append(score.value)
    except LangfuseNotFoundError:
        raise UserError(
            f"this Langfuse server ({client.capabilities.describe()}) cannot list scores (GET /api/public/v3/scores, "
            "self-hosted 3.179 or newer): compare exported sample files offline instead"
        ) from None
    run = RunValues(experiment.name, experiment.id, experiment.start_time)
    for item in items:
        values = found.get(item.trace_id, {})
        run.add(item.dataset_item_id, item.trace_id, {name: sum(v) / len(v) for name, v in values.items()})
    return run


def trace_link(client: LangfuseClient) -> Callable[[str], str | None]:
    """``trace id → its page in the Langfuse UI`` (``/project/<id>/traces/<trace id>``)."""
    project = client.info.project_id if client.info is not None else None
    if not project:
        return lambda _: None
    base = client.base_url
    return lambda trace_id: f"{base}/project/{project}/traces/{trace_id}"

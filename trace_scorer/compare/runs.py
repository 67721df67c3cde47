"""What a comparison reads from a run, wherever it came from (sample files, Langfuse, the worker's state):
each item's attempts with their score values, and which runs to compare (by name, ``latest``, ``previous``
or a name pattern)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from trace_scorer.data.outcomes import Score
from trace_scorer.data.patterns import SafePattern
from trace_scorer.errors import UserError
from trace_scorer.metrics.pass_at_k import attempt_key
from trace_scorer.scoring.pipeline import SampleResult

#: A run spec written ``re:PATTERN`` selects by a regular expression (RE2, searched anywhere in the name).
PATTERN_PREFIX = "re:"
LATEST = "latest"
PREVIOUS = "previous"


@dataclass(frozen=True)
class Attempt:
    """One run of one item (a trace): its score values by name; skipped and failed scores are absent."""

    trace_id: str | None
    values: Mapping[str, float]


@dataclass
class RunValues:
    """A run's attempts, grouped by item (the dataset item, or the sample's id offline)."""

    name: str
    id: str | None = None
    started: datetime | None = None
    items: dict[str, list[Attempt]] = field(default_factory=dict)

    def add(self, item: str, trace_id: str | None, values: Mapping[str, float]) -> None:
        finite = {name: float(v) for name, v in values.items() if math.isfinite(v)}
        self.items.setdefault(item, []).append(Attempt(trace_id, finite))

    @property
    def samples(self) -> int:
        return sum(len(attempts) for attempts in self.items.values())

    def score_names(self) -> set[str]:
        return {name for attempts in self.items.values() for a in attempts for name in a.values}

    def item_means(self, name: str) -> dict[str, float]:
        """Each item's mean over its attempts that have a ``name`` value (items without one left out)."""
        means = {}
        for item, attempts in self.items.items():
            values = [a.values[name] for a in attempts if name in a.values]
            if values:
                means[item] = sum(values) / len(values)
        return means

    def trace_ids(self, item: str) -> list[str]:
        """The item's traces, sorted (reads list attempts newest first, files in file order)."""
        return sorted(a.trace_id for a in self.items.get(item, ()) if a.trace_id)


def score_values(result: SampleResult) -> dict[str, float]:
    """The values of a sample's scores (metrics and KPIs); skipped and failed ones have none."""
    return {name: outcome.value for name, outcome in result.outcomes.items() if isinstance(outcome, Score)}


def runs_from_results(
    results: Iterable[SampleResult], *, group_by: str = "run_id", item_of: str = "item_id"
) -> dict[str, RunValues]:
    """Scored samples grouped into runs by ``group_by`` and into items by ``item_of`` (sample fields or
    ``metadata.KEY``; a sample without an item is its own item, by ``id``). A run starts at its earliest
    sample's ``start_time`` (None when no sample has one). Samples without a run are in none."""
    runs: dict[str, RunValues] = {}
    for result in results:
        sample = result.sample
        run = attempt_key(sample, group_by)
        if run is None:
            continue
        values = runs.setdefault(run, RunValues(run, run))
        values.add(attempt_key(sample, item_of) or sample.id, sample.trace_id, score_values(result))
        if sample.start_time is not None and (values.started is None or sample.start_time < values.started):
            values.started = sample.start_time
    return runs


# -- choosing runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRef:
    """A run as a list of runs shows it: what the specs below choose from."""

    name: str
    id: str
    started: datetime | None


def _matches(spec: str, name: str) -> bool:
    if spec.startswith(PATTERN_PREFIX):
        return SafePattern(spec.removeprefix(PATTERN_PREFIX)).search(name)
    return name == spec


def check_spec(spec: str) -> str:
    """``spec`` if it is usable (a ``re:`` pattern must compile), else a UserError saying why."""
    if spec.startswith(PATTERN_PREFIX):
        try:
            SafePattern(spec.removeprefix(PATTERN_PREFIX))
        except ValueError as exc:
            raise UserError(f"run pattern {spec!r}: {exc}") from None
    return spec


def _newest_first(runs: Sequence[RunRef]) -> list[RunRef]:
    return sorted(runs, key=lambda r: (r.started is not None, r.started or datetime.min, r.name), reverse=True)


def choose_candidates(spec: str, runs: Sequence[RunRef]) -> list[RunRef]:
    """``latest``: the newest run; a name: that run; ``re:PATTERN``: every matching run, newest first."""
    check_spec(spec)
    ordered = _newest_first(runs)
    chosen = ordered[:1] if spec == LATEST else [r for r in ordered if _matches(spec, r.name)]
    if not chosen:
        raise UserError(f"no run matches {spec!r} (runs: {', '.join(r.name for r in ordered[:20]) or 'none'})")
    return chosen


def choose_baseline(spec: str, runs: Sequence[RunRef], candidate: RunRef) -> RunRef | None:
    """The one run ``candidate`` is compared with. ``previous``: the newest run started before the
    candidate; a name: that run; ``re:PATTERN``: the newest matching run started before the candidate
    (any matching run when start times are unknown); ``latest``: the newest run that is not the candidate.
    None when nothing fits."""
    check_spec(spec)
    others = [r for r in _newest_first(runs) if r.id != candidate.id]
    if spec in (PREVIOUS, LATEST) or spec.startswith(PATTERN_PREFIX):
        if spec != LATEST and candidate.started is not None:
            others = [r for r in others if r.started is not None and r.started < candidate.started]
        if spec.startswith(PATTERN_PREFIX):
            others = [r for r in others if _matches(spec, r.name)]
        return others[0] if others else None
    named = [r for r in others if r.name == spec]
    return named[0] if named else None

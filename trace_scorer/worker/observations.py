"""Production traces scored per observation (``scope = "observation"``): each observation of a finished
trace that matches ``[targets.observations]`` is one sample, its scores posted with ``traceId`` +
``observationId``.

Everything about *when* a trace is read is the traces source's (windows, readiness, re-reads, retries,
the ledger): an observation is scored once its trace is finished. What differs is what one read trace
becomes: one work item per matching observation (:func:`extract.observations.observation_samples`), all
of them posted in one chunk and recorded in the ledger together under the trace's id (``WorkItem.parts``)
— so a kill at any moment leaves a trace either recorded with every observation's scores delivered, or
not recorded and scored again with the same score ids (an overwrite). A trace none of whose observations
matches is recorded as done ("no matching observation").

Reads: on v4, when the filter names only types without children (GENERATION, EVENT, EMBEDDING), the
server is asked for rows of those types (and levels) alone; otherwise whole traces are read, since an
observation's sample holds its descendants. The filter is always checked again here, on every row.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from trace_scorer.config.settings import Settings
from trace_scorer.config.targets import TargetSettings
from trace_scorer.extract.observations import observation_samples
from trace_scorer.extract.rows import Observation
from trace_scorer.langfuse import TraceRoot
from trace_scorer.langfuse.reads.observation_filter import ObservationFilter
from trace_scorer.worker.batch import WorkItem
from trace_scorer.worker.traces import TraceSource, retry_payload


def observation_filter(target: TargetSettings) -> ObservationFilter:
    """The target's ``[targets.observations]`` as the filter rows are checked with (whatever its scope)."""
    found = ObservationFilter.of(target.model_copy(update={"scope": "observation"}))
    assert found is not None
    return found


class ObservationSource(TraceSource):
    """The ``traces`` source of a target with ``scope = "observation"``."""

    def prepare(self, settings: Settings) -> None:
        super().prepare(settings)
        self.observations = observation_filter(self.target)

    def row_conditions(self) -> Sequence[dict[str, Any]]:
        """What the server may filter the trace reads on (nothing when a sample needs whole subtrees)."""
        return self.observations.v4_conditions() if self.observations.leaves_only else ()

    def work_items(self, observations: Sequence[Observation], root: TraceRoot) -> list[WorkItem]:
        samples = observation_samples(
            observations,
            self.observations.matches,
            trace_id=root.trace_id,
            references=self.target.references,
            trace_row=root.row,
        )
        payload = functools.partial(retry_payload, root)
        return [
            WorkItem(
                sample,
                root.start_time,
                root.environment,
                payload,
                observation_id=sample.observation_id,
                parts=len(samples),
            )
            for sample in samples
        ]

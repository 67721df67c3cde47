"""The typed objects the rest of trace-scorer sees; both API generations produce exactly these.

Observation rows come in the v4 camelCase shape (``id``, ``traceId``, ``type``, ``name``, ``startTime``,
``endTime``, ``parentObservationId``, ``isRootObservation``, ``input``/``output`` as raw strings,
``metadata``, ``environment``, ``updatedAt``, …), whichever generation they came from; a trace's rows are
read once into records (:class:`~trace_scorer.extract.rows.Observation`, times parsed, de-duplicated,
oldest first) where they are read: :class:`TraceRows`, extraction's input.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from trace_scorer.extract.rows import Observation, dedupe_observations, sort_observations
from trace_scorer.langfuse.server.capabilities import ScorePosting
from trace_scorer.langfuse.writes.ids import score_id

if TYPE_CHECKING:  # the scanner imports these types
    from trace_scorer.langfuse.reads.trace_scan import IdReads

#: One observation row, v4 camelCase shape (see the module docstring).
Row = dict[str, Any]

ScoreDataType = Literal["NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT"]


class ApiGeneration(enum.StrEnum):
    """v4: observations/experiments APIs (Cloud, self-hosted 4.x). v3: legacy traces/dataset runs (2.x, 3.x)."""

    V4 = "v4"
    V3 = "v3"


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What start-up found: printed by ``trace-scorer check``, logged by the worker."""

    base_url: str
    server_version: str
    project_id: str
    project_name: str
    generation: ApiGeneration
    #: How scores are written to this server (decided from its version; see :mod:`.server`).
    score_posting: ScorePosting = ScorePosting.INGESTION
    #: Why this generation: "configured", "version", or "probed".
    generation_source: str = "probed"


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open interval ``[start, end)`` of timezone-aware datetimes."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("TimeWindow needs timezone-aware datetimes")
        if not self.start < self.end:
            raise ValueError(f"TimeWindow start {self.start.isoformat()} is not before end {self.end.isoformat()}")


@dataclass(frozen=True, slots=True)
class TraceFilter:
    """Which traces a target reads. Empty fields do not filter.

    environments: any of these; exclude_environments: none of these; tags: all of these;
    metadata: every key equal to its value (top-level keys of the root's metadata).
    """

    environments: tuple[str, ...] = ()
    exclude_environments: tuple[str, ...] = ()
    trace_name: str | None = None
    tags: tuple[str, ...] = ()
    user_id: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: One session's traces (scope = "session" reads a session's traces with it).
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class TraceRoot:
    """A trace as its root observation describes it (v4), or the trace object itself (v3).

    ``end_time`` None means "not finished yet" as far as Langfuse knows (v3: derived from the trace's
    timestamp + latency, since v3 traces have no end time).
    """

    trace_id: str
    #: The root row's id (v3: ``t-<traceId>``, the id Langfuse v4 gives a legacy trace's root).
    observation_id: str
    name: str | None
    start_time: datetime
    end_time: datetime | None
    environment: str | None
    updated_at: datetime | None
    user_id: str | None
    session_id: str | None
    tags: tuple[str, ...]
    metadata: Mapping[str, Any]
    #: The root row itself (v4 shape).
    row: Row
    #: Every root row of the trace the listing that made this one held (a trace can have several), each
    #: with the fields a read of the trace's rows returns: its rows are then read without their roots
    #: (issue #29: a root read once, in the listing). None: not known (a root made from a stored row,
    #: or listed without its input and output), so a read of the trace reads its roots too.
    listed_roots: tuple[Row, ...] | None = None


@dataclass(frozen=True, slots=True)
class TraceRows:
    """All observations of one trace as records, de-duplicated, oldest first. Empty: trace not found."""

    trace_id: str
    observations: list[Observation]

    @classmethod
    def read(cls, trace_id: str, observations: list[Observation]) -> TraceRows:
        """A trace's records as read (duplicates of an observation among them): the newest of each,
        oldest first."""
        return cls(trace_id, sort_observations(dedupe_observations(observations)))

    @property
    def rows(self) -> list[Mapping[str, Any]]:
        """The rows as Langfuse sent them (the records' own)."""
        return [o.row for o in self.observations]


@dataclass(frozen=True, slots=True)
class Dataset:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Experiment:
    """A dataset run (v3) / experiment (v4). ``id`` is what scores use as ``datasetRunId``.

    v4 reports ``start_time``/``end_time``/``item_count`` within the queried window only; v3 reports
    the run's creation, no end time (None), and the run's *total* item count.
    """

    id: str
    name: str
    dataset_id: str | None
    start_time: datetime
    end_time: datetime | None
    item_count: int | None
    description: str | None
    metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ExperimentItem:
    """One run of one dataset item: its trace, and what the item expected.

    ``expected_output`` None means the item has no expected output (absent, not empty). ``output`` is the
    task's output on v4; None on v3 (read it from the trace's root row).
    """

    trace_id: str
    #: The item's root observation (v4) / the run item's observation, if any (v3).
    observation_id: str | None
    experiment_id: str
    experiment_name: str
    #: The dataset item id (Langfuse calls it ``experimentItemId``).
    dataset_item_id: str
    dataset_id: str | None
    start_time: datetime
    environment: str | None
    input: Any
    output: Any
    expected_output: Any
    metadata: Mapping[str, Any]
    item_metadata: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ConfigCategory:
    value: float
    label: str


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    """A score config as Langfuse has it; scores naming it are validated against it (also by the server)."""

    id: str
    name: str
    data_type: str
    min_value: float | None = None
    max_value: float | None = None
    categories: tuple[ConfigCategory, ...] = ()
    is_archived: bool = False
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreConfigSpec:
    """A score config we want to exist: one per score name, NUMERIC 0..1 unless told otherwise."""

    name: str
    data_type: ScoreDataType = "NUMERIC"
    min_value: float | None = 0.0
    max_value: float | None = 1.0
    categories: tuple[ConfigCategory, ...] = ()
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ScoreSubject:
    """What a score is attached to: a trace (optionally one of its observations), a dataset run, or a
    session. A session score on a server that refuses scores without a trace (2.x) also names the trace
    it is posted on (``trace_id``); its id is the session's either way (:func:`.ids.score_id`)."""

    trace_id: str | None = None
    observation_id: str | None = None
    dataset_run_id: str | None = None
    session_id: str | None = None

    @classmethod
    def trace(cls, trace_id: str, observation_id: str | None = None) -> ScoreSubject:
        return cls(trace_id=trace_id, observation_id=observation_id)

    @classmethod
    def run(cls, dataset_run_id: str) -> ScoreSubject:
        return cls(dataset_run_id=dataset_run_id)

    @classmethod
    def session(cls, session_id: str, on_trace: str | None = None) -> ScoreSubject:
        """A session's score; ``on_trace``: posted on that trace of it (servers without session scores)."""
        return cls(trace_id=on_trace, session_id=session_id)


@dataclass(frozen=True, slots=True)
class ScoreToPost:
    """One score to write. Its id is derived from subject and name (see :mod:`.ids`), never random.

    ``timestamp`` must be deterministic (the trace's start time, the run's first-seen start time):
    Langfuse upserts on id + name + date of the timestamp.
    """

    subject: ScoreSubject
    name: str
    value: float | str | bool
    timestamp: datetime
    data_type: ScoreDataType = "NUMERIC"
    comment: str | None = None
    metadata: Mapping[str, Any] | None = None
    environment: str | None = None
    config_id: str | None = None
    #: Derived from subject and name once (a uuid5: posting reads it several times a score).
    id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", score_id(self.subject, self.name))


@dataclass(frozen=True, slots=True)
class RejectedScore:
    score: ScoreToPost
    reason: str
    #: "client": failed our validation, never sent. "server": Langfuse rejected it.
    by: Literal["client", "server"]


@dataclass(frozen=True, slots=True)
class UnattributedBatch:
    """A partly rejected v4 batch we could not bisect (budget spent): counts and messages only."""

    scores: tuple[ScoreToPost, ...]
    accepted: int
    rejected: int
    messages: tuple[str, ...]


@dataclass
class DeliveryReport:
    """What happened to every score handed to ``post_scores``: each is in exactly one list.

    ``accepted``: Langfuse took it (processing is asynchronous). ``rejected``: it will never be accepted
    as it is (fix the data or the config). ``undelivered``: not known to have arrived (Langfuse down
    after the retries): safe to post again, the ids make it an overwrite. ``unattributed``: in a batch
    Langfuse accepted only partly, without saying which.
    """

    accepted: list[ScoreToPost] = field(default_factory=list)
    rejected: list[RejectedScore] = field(default_factory=list)
    undelivered: list[ScoreToPost] = field(default_factory=list)
    unattributed: list[UnattributedBatch] = field(default_factory=list)
    #: Why scores are undelivered (the last transport/HTTP error).
    errors: list[str] = field(default_factory=list)
    #: Score requests sent (bisection included, retries not).
    requests: int = 0

    @property
    def complete(self) -> bool:
        """Every score has a final answer (accepted or rejected): the caller may move on."""
        return not self.undelivered and not self.unattributed


#: The ids of those of these roots the caller has done with already (a listing does not hold them).
KnownTraces = Callable[[Sequence["TraceRoot"]], Collection[str]]


@dataclass(frozen=True, slots=True)
class RootListing:
    """The roots of a window up to ``complete_until``: every matching trace whose root starts in
    ``[window.start, complete_until)`` is in ``roots`` (but those the caller knew). ``complete_until`` is the
    window's end unless the listing stopped at its ``max_traces`` (then the next window starts there)."""

    roots: list[TraceRoot]
    complete_until: datetime


class LangfuseReads(Protocol):
    """The reads the sources use; one implementation per API generation."""

    #: True when a trace's root row appears only once the root ended (v4): a source must read again
    #: behind its watermark, or a long trace would be missed.
    rows_appear_at_end: bool

    @property
    def id_reads(self) -> IdReads | None:
        """How many traces one ``traceId any of`` read holds (v4), or None: no such reads (v3)."""
        ...

    def list_trace_roots(self, window: TimeWindow, trace_filter: TraceFilter) -> AsyncIterator[TraceRoot]:
        """Traces whose root starts in ``window`` and match the filter, each once, newest first (v4)."""
        ...

    async def list_roots(
        self,
        window: TimeWindow,
        trace_filter: TraceFilter,
        *,
        max_traces: int = 0,
        known: KnownTraces | None = None,
        ended_since: datetime | None = None,
    ) -> RootListing:
        """The window's roots as :meth:`list_trace_roots`, but no more than ``max_traces`` (0: no limit) of the
        earliest, and none of those ``known`` names: a listing holds that many roots at most, whatever the
        window holds. (A window whose first ``max_traces + 1`` roots start at one instant is listed whole.)
        With ``ended_since``, only roots that ended then or later (what became visible since a listing)."""
        ...

    def fetch_traces(
        self, roots: Sequence[TraceRoot], *, only: Sequence[Mapping[str, Any]] = ()
    ) -> AsyncIterator[TraceRows]:
        """All observation rows of these traces, each trace once (order not guaranteed). ``only``: v4
        ``filter`` conditions on the rows a caller needs (a v4 server then sends only those; legacy
        servers send whole traces, so the caller checks its conditions on every row anyway)."""
        ...

    async def get_dataset(self, name: str) -> Dataset: ...

    def list_experiments(
        self,
        datasets: Sequence[Dataset],
        since: datetime,
        until: datetime | None = None,
        *,
        tracked: Collection[str] = (),
    ) -> AsyncIterator[Experiment]:
        """Experiments (dataset runs) of these datasets with activity since ``since``.

        ``tracked``: ids of runs the caller still follows; v3 lists them too however old they are (v3
        cannot tell a run's activity, see ``reads_v3``); v4 reports activity itself and ignores them.
        """
        ...

    def list_experiment_items(self, experiment: Experiment, since: datetime) -> AsyncIterator[ExperimentItem]:
        """The experiment's items started since ``since``, with their expected output."""
        ...

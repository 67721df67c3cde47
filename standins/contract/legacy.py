"""The shapes the ``langfuse`` 5.x package no longer models, written down by us: the v3 legacy reads, the
ingestion envelope and its answer, and the ``{id}`` older servers answer to one score.

Written from what real 2.x / 3.x / 4.x servers send (docs/langfuse.md), not copied from Langfuse's files.
Validation is strict where JSON is exact (a string is not a number, ``"true"`` is not a boolean, a time is
RFC 3339 with an offset); fields may be added by a server (``extra="allow"``), as Langfuse adds fields
between releases. A field typed ``X | None`` without a default must be present (``null`` allowed).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


def is_rfc3339(value: str) -> bool:
    """An ISO 8601 date and time with an offset (``Z`` or ``±hh:mm``), as Langfuse writes and reads times."""
    if "T" not in value and "t" not in value:
        return False
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None


def _rfc3339(value: str) -> str:
    if not is_rfc3339(value):
        raise ValueError(f"{value!r} is not a date-time with an offset")
    return value


Timestamp = Annotated[str, AfterValidator(_rfc3339)]
Level = Literal["DEBUG", "DEFAULT", "WARNING", "ERROR"]


class Shape(BaseModel):
    """Fields in camelCase on the wire, JSON types exact, unknown fields allowed."""

    model_config = ConfigDict(strict=True, extra="allow", alias_generator=to_camel)


class Deprecation(Shape):
    """The notice 3.x puts on its legacy answers."""

    message: str
    replacement: str | None = None
    docs_url: str | None = None
    sunset_at: str | None = None


class PageMeta(Shape):
    page: int
    limit: int
    total_items: int
    total_pages: int


class Page(Shape):
    """A page by number (the legacy routes' paging)."""

    meta: PageMeta
    deprecation: Deprecation | None = Field(None, alias="_deprecation")


# --- traces -------------------------------------------------------------------------------------------


class Trace(Shape):
    id: str
    timestamp: Timestamp
    name: str | None
    input: Any = None
    output: Any = None
    session_id: str | None
    release: str | None
    version: str | None
    user_id: str | None
    metadata: Any = None
    tags: list[str]
    public: bool
    environment: str


class TraceInList(Trace):
    """A row of ``GET /traces``: observation and score ids only."""

    html_path: str
    latency: float | None = None
    total_cost: float | None = None
    observations: list[str] | None = None
    scores: list[str] | None = None


class Traces(Page):
    """``GET /api/public/traces``."""

    data: list[TraceInList]


class Usage(Shape):
    input: int
    output: int
    total: int
    unit: str | None
    input_cost: float | None = None
    output_cost: float | None = None
    total_cost: float | None = None


class Observation(Shape):
    """An observation as the legacy reads answer it (every key present, ``null`` where unset)."""

    id: str
    trace_id: str | None
    type: str
    name: str | None
    start_time: Timestamp
    end_time: Timestamp | None
    completion_start_time: Timestamp | None
    model: str | None
    model_parameters: Any
    input: Any
    version: str | None
    metadata: Any
    output: Any
    usage: Usage
    level: Level
    status_message: str | None
    parent_observation_id: str | None
    prompt_id: str | None
    usage_details: dict[str, int]
    cost_details: dict[str, float]
    environment: str


class ObservationView(Observation):
    """An observation with its prompt, model prices and computed costs (``observations_view``)."""

    prompt_name: str | None
    prompt_version: int | None
    model_id: str | None
    input_price: float | None
    output_price: float | None
    total_price: float | None
    calculated_input_cost: float | None
    calculated_output_cost: float | None
    calculated_total_cost: float | None
    latency: float | None
    time_to_first_token: float | None


class ObservationViews(Page):
    """``GET /api/public/observations``."""

    data: list[ObservationView]


class ScoreOfTrace(Shape):
    """A score inside ``GET /traces/{id}`` (v1 scores: always on a trace)."""

    id: str
    trace_id: str
    name: str
    source: Literal["ANNOTATION", "API", "EVAL"]
    observation_id: str | None = None
    timestamp: Timestamp
    created_at: Timestamp
    updated_at: Timestamp
    author_user_id: str | None
    comment: str | None
    metadata: Any
    config_id: str | None
    queue_id: str | None
    environment: str


class NumericScoreOfTrace(ScoreOfTrace):
    data_type: Literal["NUMERIC"]
    value: float


class LabelledScoreOfTrace(ScoreOfTrace):
    """Categorical and boolean scores carry both the number and its label."""

    data_type: Literal["CATEGORICAL", "BOOLEAN"]
    value: float
    string_value: str


class TextScoreOfTrace(ScoreOfTrace):
    data_type: Literal["TEXT"]
    string_value: str


class TraceWithFullDetails(Trace):
    """``GET /api/public/traces/{traceId}``: the trace with its observations and scores."""

    html_path: str
    latency: float | None = None
    total_cost: float | None = None
    observations: list[ObservationView]
    scores: list[
        Annotated[NumericScoreOfTrace | LabelledScoreOfTrace | TextScoreOfTrace, Field(discriminator="data_type")]
    ]
    deprecation: Deprecation | None = Field(None, alias="_deprecation")


class Session(Shape):
    """A row of ``GET /api/public/sessions`` (legacy servers)."""

    id: str
    created_at: Timestamp
    project_id: str
    environment: str | None = None


class Sessions(Page):
    """``GET /api/public/sessions``."""

    data: list[Session]


class SessionWithTraces(Shape):
    """``GET /api/public/sessions/{sessionId}`` (legacy servers): the session and all its traces, unpaged."""

    id: str
    created_at: Timestamp
    project_id: str
    environment: str | None = None
    traces: list[Trace]
    deprecation: Deprecation | None = Field(None, alias="_deprecation")


# --- dataset runs -----------------------------------------------------------------------------------


class DatasetRun(Shape):
    id: str
    name: str
    description: str | None
    metadata: Any
    dataset_id: str
    dataset_name: str
    created_at: Timestamp
    updated_at: Timestamp


class DatasetRuns(Page):
    """``GET /api/public/datasets/{datasetName}/runs``."""

    data: list[DatasetRun]


class DatasetRunItem(Shape):
    id: str
    dataset_run_id: str
    dataset_run_name: str
    dataset_item_id: str
    trace_id: str
    observation_id: str | None
    created_at: Timestamp
    updated_at: Timestamp


class DatasetRunItems(Page):
    """``GET /api/public/dataset-run-items``."""

    data: list[DatasetRunItem]


class DatasetRunWithItems(DatasetRun):
    """``GET /api/public/datasets/{datasetName}/runs/{runName}``: how 2.x serves a run's items."""

    dataset_run_items: list[DatasetRunItem]
    deprecation: Deprecation | None = Field(None, alias="_deprecation")


# --- writes -------------------------------------------------------------------------------------------

#: Event types ``POST /ingestion`` knows; only ``score-create`` bodies are checked (the stand-in stores
#: nothing else), against the package's ``ScoreBody``.
EVENT_TYPES = Literal[
    "trace-create",
    "score-create",
    "span-create",
    "span-update",
    "generation-create",
    "generation-update",
    "event-create",
    "sdk-log",
    "observation-create",
    "observation-update",
]


class IngestionEvent(Shape):
    """One event of an ingestion batch: its own id (de-duplicated by the server), its time, its body."""

    id: str
    type: EVENT_TYPES
    timestamp: Timestamp
    body: dict[str, Any]
    metadata: Any = None


class IngestionBatch(Shape):
    """The body of ``POST /api/public/ingestion``."""

    batch: list[IngestionEvent]
    metadata: Any = None


class IngestionSuccess(Shape):
    id: str
    status: int


class IngestionError(Shape):
    id: str
    status: int
    message: str | None = None
    error: Any = None


class IngestionResponse(Shape):
    """The 207 of ``POST /ingestion``: a result per event."""

    successes: list[IngestionSuccess]
    errors: list[IngestionError]


class CreatedScore(Shape):
    """The 200 servers before 4.59 answer to ``POST /scores`` with one object."""

    id: str

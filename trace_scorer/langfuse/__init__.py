"""The Langfuse adapter: the only code that knows Langfuse's wire format (see docs/langfuse.md)."""

from trace_scorer.langfuse.client import LangfuseClient
from trace_scorer.langfuse.errors import (
    LangfuseAuthError,
    LangfuseContractError,
    LangfuseError,
    LangfuseHTTPError,
    LangfuseNotFoundError,
    LangfuseResponseError,
    LangfuseTransportError,
)
from trace_scorer.langfuse.http.stats import RequestStats
from trace_scorer.langfuse.reads.rows import trace_root_from_row
from trace_scorer.langfuse.server.capabilities import ScorePosting, ServerCapabilities
from trace_scorer.langfuse.types import (
    ApiGeneration,
    ConnectionInfo,
    Dataset,
    DeliveryReport,
    Experiment,
    ExperimentItem,
    LangfuseReads,
    RejectedScore,
    Row,
    ScoreConfig,
    ScoreConfigSpec,
    ScoreSubject,
    ScoreToPost,
    TimeWindow,
    TraceFilter,
    TraceRoot,
    TraceRows,
    UnattributedBatch,
)
from trace_scorer.langfuse.writes.ids import score_id

__all__ = [
    "ApiGeneration",
    "ConnectionInfo",
    "Dataset",
    "DeliveryReport",
    "Experiment",
    "ExperimentItem",
    "LangfuseAuthError",
    "LangfuseClient",
    "LangfuseContractError",
    "LangfuseError",
    "LangfuseHTTPError",
    "LangfuseNotFoundError",
    "LangfuseReads",
    "LangfuseResponseError",
    "LangfuseTransportError",
    "RejectedScore",
    "RequestStats",
    "Row",
    "ScoreConfig",
    "ScoreConfigSpec",
    "ScorePosting",
    "ScoreSubject",
    "ScoreToPost",
    "ServerCapabilities",
    "TimeWindow",
    "TraceFilter",
    "TraceRoot",
    "TraceRows",
    "UnattributedBatch",
    "score_id",
    "trace_root_from_row",
]

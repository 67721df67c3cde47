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
from trace_scorer.langfuse.ids import score_id
from trace_scorer.langfuse.rows import trace_root_from_row
from trace_scorer.langfuse.server import ScorePosting, ServerCapabilities
from trace_scorer.langfuse.stats import RequestStats
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

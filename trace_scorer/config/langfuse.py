"""``[langfuse]``: where the Langfuse server is and how to talk to it. Keys come from the environment.

Defaults keep a worker inside Langfuse Cloud's plan limits: retries back off 2 s, ×2, up to 30 s
(the seed configuration), score batches stay under the 1 MB body limit of ``POST /api/public/scores``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from trace_scorer.config.common import Duration, StrictModel

#: ``POST /api/public/scores`` runs behind a 1 MB body limit (Next.js default); stay under it.
SCORE_BODY_LIMIT_BYTES = 1_000_000


#: The smallest ``max_answer_bytes`` other than 0: a page of one plain observation, or a health check, fits.
MIN_ANSWER_BYTES = 10_000


class LangfuseRetrySettings(StrictModel):
    """``[langfuse.retry]``: back-off for 429, 5xx, timeouts and dropped connections."""

    #: First wait after a failure (seconds or "2s").
    initial: Duration = 2.0
    #: Each further wait is the previous one times this.
    multiplier: float = Field(default=2.0, ge=1.0)
    #: No single wait is longer than this.
    max: Duration = 30.0
    #: Attempts per request, the first one included; then the error is raised.
    max_attempts: int = Field(default=6, ge=1, le=50)
    #: A 429 whose Retry-After asks for longer than this is raised instead of waited out.
    retry_after_max: Duration = 300.0

    @model_validator(mode="after")
    def _ordered(self) -> LangfuseRetrySettings:
        if self.max < self.initial:
            raise ValueError(f"retry.max ({self.max}s) is shorter than retry.initial ({self.initial}s)")
        return self


class LangfuseSettings(StrictModel):
    base_url: str = "https://cloud.langfuse.com"
    #: Public key (pk-lf-…); also read from LANGFUSE_PUBLIC_KEY.
    public_key: str | None = None
    #: Secret key (sk-lf-…): from the environment only
    #: (LANGFUSE_SECRET_KEY or TRACE_SCORER_LANGFUSE__SECRET_KEY).
    secret_key: SecretStr | None = None
    #: Per-request timeout (connect, read, write), each on its own: a server trickling bytes never reaches it.
    timeout: Duration = 30.0
    #: Most time one request may take in all, reading the whole answer included; running out counts and is
    #: retried like a timeout. Unset: 3 × ``timeout`` (90 s by default).
    request_deadline: Duration | None = Field(default=None, gt=0)
    #: Which API generation to use: "auto" probes the server once at start-up (v4 endpoints, legacy on 404).
    api_generation: Literal["auto", "v4", "v3"] = "auto"
    #: How scores are written: "auto" decides from the server's version (the ``POST /scores`` list on
    #: Cloud and self-hosted ≥ 4.59, ingestion ``score-create`` events on every other server);
    #: "scores-batch" or "ingestion" force one.
    score_posting: Literal["auto", "scores-batch", "ingestion"] = "auto"
    retry: LangfuseRetrySettings = Field(default_factory=LangfuseRetrySettings)
    #: Requests per minute to Langfuse across all endpoints, retries included; 0 = unlimited.
    #: Langfuse Cloud Hobby allows 30/min on the general API, self-hosted has no limit.
    requests_per_minute: int = Field(default=0, ge=0)
    #: Most scores in one ``POST /scores`` (or ingestion) request.
    score_batch_size: int = Field(default=500, ge=1, le=10_000)
    #: Most bytes in one score request body; must stay under the server's 1 MB limit.
    score_batch_max_bytes: int = Field(default=950_000, ge=10_000, lt=SCORE_BODY_LIMIT_BYTES)
    #: Extra requests one ``post_scores`` call may spend bisecting a partly rejected (207) v4 batch to
    #: find which scores were rejected (v4 errors carry no index). 0 = never bisect, report counts only.
    score_bisect_max_requests: int = Field(default=32, ge=0)
    #: Rows per page for ``/api/public/v2/observations`` (server maximum 1000). Experiments, experiment
    #: items and legacy endpoints use min(page_size, 100).
    page_size: int = Field(default=1000, ge=1, le=1000)
    #: Most observation rows one window scan holds in memory; a fuller window is split in halves.
    max_rows_in_memory: int = Field(default=50_000, ge=100)
    #: A trace with more observation rows than this is not scored: its reads stop at the cap, it is counted
    #: under ``traces_skipped_total{reason="too many observations"}``, logged once and recorded as done.
    #: 0 = no cap (a trace is read whole, whatever its size).
    max_rows_per_trace: int = Field(default=20_000, ge=0)
    #: A session (``scope = "session"``) whose traces hold more observation rows than this, together, is not
    #: scored: a session is held whole until it is scored, as one trace is. Its rows are dropped the moment
    #: it goes over, it is counted under ``sessions_skipped_total{reason="session too large"}``, logged once
    #: and recorded as done. The default is ``max_rows_in_memory``'s: what one window scan may hold.
    #: 0 = no cap.
    max_rows_per_session: int = Field(default=50_000, ge=0)
    #: Longest answer read from Langfuse, in bytes (0 = no limit): a longer one stops being read. A page of
    #: observations over it is asked again with fewer rows, down to one; a trace whose rows cannot be read
    #: within it (one row over it) is skipped — ``traces_skipped_total{reason="answer too large"}`` —
    #: never its window. Parsed JSON takes ~4 times its text: the default keeps a page under ~100 MB.
    max_answer_bytes: int = Field(default=20_000_000, ge=0)
    #: Longest ``input`` or ``output`` text of one observation, in characters (0 = no limit): a trace with a
    #: longer one is skipped (``reason="field too large"``), logged once, rather than extracted and scored.
    max_field_chars: int = Field(default=5_000_000, ge=0)
    #: How far a trace's observations may start before its root's start or after its root's end.
    trace_slack: Duration = 300.0
    #: Up to this many traces are fetched one request each (``traceId=…``); more use one window scan.
    per_trace_fetch_max: int = Field(default=2, ge=0)

    @model_validator(mode="after")
    def _answers_fit_a_row(self) -> LangfuseSettings:
        if 0 < self.max_answer_bytes < MIN_ANSWER_BYTES:
            raise ValueError(
                f"max_answer_bytes: {self.max_answer_bytes} is below {MIN_ANSWER_BYTES} bytes, too small for "
                "Langfuse's own answers (0 = no limit)"
            )
        return self

    @property
    def deadline(self) -> float:
        """The total deadline of one request, in seconds (``request_deadline``, else 3 × ``timeout``)."""
        return self.request_deadline if self.request_deadline is not None else 3 * self.timeout

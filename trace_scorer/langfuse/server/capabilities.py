"""What a Langfuse server can do, decided from the version ``/api/public/health`` reports.

Real servers differ in ways the API's description does not show (see docs/langfuse.md, "API
generations"); every version-dependent choice of the adapter is made
here, once, from :class:`ServerCapabilities`, so the rest of the adapter asks "can it?" rather than
comparing version numbers.

| server | reads | scores posted through |
|---|---|---|
| 2.x (≥ 2.60) | legacy (v3 routes; run items under ``/datasets/{name}/runs/{run}``) | ``POST /ingestion`` |
| 3.x | legacy (v3 routes) | ``POST /ingestion`` |
| 4.0 – 4.58 | v4 (observations v2, experiments) | ``POST /ingestion`` (``POST /scores`` takes one object) |
| ≥ 4.59, Cloud | v4 | ``POST /scores`` with a list (202/207) |
| version unknown | probed | ``POST /ingestion`` (accepted by every generation) |
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

#: First self-hosted release whose ``POST /api/public/scores`` takes a JSON list (the docs; SDK v5).
BATCH_SCORES_VERSION = (4, 59, 0)
#: First major version whose scores can name a ``datasetRunId`` (run-level scores).
RUN_SCORES_MAJOR = 3
#: First major version serving Langfuse's evaluators and evaluation rules over the (unstable) API.
EVALUATORS_MAJOR = 4

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


class ScorePosting(enum.StrEnum):
    """How scores are written. Both upsert on the score id (see :mod:`.ids`)."""

    #: ``POST /api/public/scores`` with a JSON list; 202, or 207 with counts (newer servers only).
    SCORES_BATCH = "scores-batch"
    #: ``POST /api/public/ingestion`` with ``score-create`` events; 207 with a result per event.
    INGESTION = "ingestion"


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``"4.16.0"`` / ``"v3.120.1-rc"`` → (4, 16, 0); None when the text is not a version."""
    match = _VERSION.match((text or "").strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


@dataclass(frozen=True, slots=True)
class ServerCapabilities:
    """The version-dependent behaviour of one server (``version`` None: unknown, assume the least)."""

    version: tuple[int, int, int] | None

    @classmethod
    def from_version(cls, text: str | None) -> ServerCapabilities:
        return cls(parse_version(text))

    @property
    def major(self) -> int | None:
        return self.version[0] if self.version else None

    @property
    def is_v2(self) -> bool:
        """Langfuse 2.x: PostgreSQL only, legacy API only, older answer shapes."""
        return self.major == 2

    @property
    def legacy_only(self) -> bool:
        """Known to have no v4 API worth reading (2.x, 3.x): read through the legacy routes, no probe."""
        return self.major is not None and self.major < 4

    @property
    def score_posting(self) -> ScorePosting:
        """The list endpoint only where the version is known to have it; ingestion everywhere else."""
        if self.version is not None and self.version >= BATCH_SCORES_VERSION:
            return ScorePosting.SCORES_BATCH
        return ScorePosting.INGESTION

    @property
    def run_scores(self) -> bool:
        """Scores on a dataset run (``datasetRunId``): not on 2.x, which requires a ``traceId``."""
        return self.major is None or self.major >= RUN_SCORES_MAJOR

    @property
    def session_scores(self) -> bool:
        """Scores on a session (``sessionId``, no ``traceId``): not on 2.x, which requires a ``traceId``
        (400 ``traceId Required``); a session's score goes on one of its traces there."""
        return self.major is None or self.major >= RUN_SCORES_MAJOR

    @property
    def config_ranges_exclusive(self) -> bool:
        """2.x rejects a value equal to a score config's min or max (later versions include the bounds)."""
        return self.is_v2

    @property
    def run_items_by_run_name(self) -> bool:
        """2.x has no ``/dataset-run-items`` (405): a run's items come with ``/datasets/{name}/runs/{run}``."""
        return self.is_v2

    @property
    def otlp(self) -> bool:
        """The OTLP endpoint (judge-call tracing): not on 2.x."""
        return not self.is_v2

    @property
    def evaluators_api(self) -> bool | None:
        """``/api/public/unstable/evaluators`` and ``/evaluation-rules``: seen on 4.16, absent on 2.95
        (HTML 404); 3.x is taken to lack them. None: version unknown, ask and read a 404 as absent."""
        if self.major is None:
            return None
        return self.major >= EVALUATORS_MAJOR

    def describe(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "unknown"

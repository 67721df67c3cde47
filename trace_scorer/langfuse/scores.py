"""Posting scores: validate, build, batch under the body limit, send, and account for every score.

- v4: ``POST /api/public/scores`` with a JSON list. 202: all accepted. 207: ``accepted``/``rejected``
  counts and messages *without* indices — the batch is never blindly resent; it is bisected (halves
  resent: safe, the ids make a resend an overwrite) until each rejected score is found, within a
  request budget; what the budget does not cover is reported as an unattributed batch. A 400/413/422
  on the whole list is bisected the same way (one bad element can fail a list).
- v3: ``POST /api/public/ingestion`` with ``score-create`` events; its 207 names each event, so each
  score's fate is known without bisecting. The event ``timestamp`` is the score's timestamp (Langfuse
  v3 takes it from the envelope).
- 429/5xx/timeouts are retried by the transport; if Langfuse stays down, this batch and the rest are
  reported undelivered (safe to post again later) — never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langfuse.api import AsyncLangfuseAPI
from langfuse.api.core.datetime_utils import serialize_datetime
from langfuse.api.scores import CreateScoreRequest

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.langfuse.endpoints import INGESTION, SCORES_CREATE
from trace_scorer.langfuse.errors import (
    LangfuseAuthError,
    LangfuseHTTPError,
    LangfuseNotFoundError,
    LangfuseTransportError,
)
from trace_scorer.langfuse.ids import format_timestamp, ingestion_event_id, normalize_timestamp
from trace_scorer.langfuse.score_validation import validate_score
from trace_scorer.langfuse.transport import Answer, LegacyAnswer, Transport, error_message
from trace_scorer.langfuse.types import (
    ApiGeneration,
    DeliveryReport,
    RejectedScore,
    ScoreConfig,
    ScoreToPost,
    UnattributedBatch,
)

T = TypeVar("T")

#: Statuses of a whole v4 list that mean "something in this list is invalid": bisect to find it.
_INVALID_LIST_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True, slots=True)
class _Prepared:
    score: ScoreToPost
    #: The JSON sent for this score (v4: list element; v3: the ingestion event).
    body: dict[str, Any]
    size: int


def json_size(value: Any) -> int:
    """Bytes of ``value`` as httpx encodes JSON bodies (compact, UTF-8, no ASCII escaping)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode())


def _wire_value(score: ScoreToPost) -> float | str:
    if score.data_type in ("NUMERIC", "BOOLEAN"):
        return float(score.value)
    return str(score.value)


def score_fields(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """The score's fields in Langfuse's camelCase, without the timestamp; absent values left out."""
    fields: dict[str, Any] = {
        "id": score.id,
        "traceId": score.subject.trace_id,
        "observationId": score.subject.observation_id,
        "datasetRunId": score.subject.dataset_run_id,
        "name": score.name,
        "value": _wire_value(score),
        "dataType": score.data_type,
        "comment": score.comment,
        "metadata": dict(score.metadata) if score.metadata is not None else None,
        "environment": score.environment,
        "configId": config_id,
    }
    return {key: value for key, value in fields.items() if value is not None}


def v4_body(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """One ``CreateScoreRequest`` as the generated client serialises it (timestamp included)."""
    return {
        **score_fields(score, config_id),
        "timestamp": serialize_datetime(normalize_timestamp(score.timestamp)),
    }


def v3_event(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """One ``score-create`` ingestion event; its id is stable for the same content (see ids)."""
    body = score_fields(score, config_id)
    timestamp = format_timestamp(score.timestamp)
    canonical = json.dumps({"timestamp": timestamp, "body": body}, sort_keys=True, separators=(",", ":"))
    return {
        "id": ingestion_event_id(score.id, canonical),
        "type": "score-create",
        "timestamp": timestamp,
        "body": body,
    }


def _create_request(body: Mapping[str, Any], score: ScoreToPost) -> CreateScoreRequest:
    names = {
        "traceId": "trace_id",
        "observationId": "observation_id",
        "datasetRunId": "dataset_run_id",
        "dataType": "data_type",
        "configId": "config_id",
    }
    kwargs = {names.get(key, key): value for key, value in body.items() if key != "timestamp"}
    return CreateScoreRequest(**kwargs, timestamp=normalize_timestamp(score.timestamp))


def batches(
    prepared: Sequence[_Prepared], *, max_count: int, max_bytes: int, overhead: int
) -> list[list[_Prepared]]:
    """Consecutive batches of at most ``max_count`` scores whose body stays within ``max_bytes``."""
    out: list[list[_Prepared]] = []
    current: list[_Prepared] = []
    size = overhead
    for item in prepared:
        added = item.size + (1 if current else 0)
        if current and (len(current) >= max_count or size + added > max_bytes):
            out.append(current)
            current, size, added = [], overhead, item.size
        current.append(item)
        size += added
    if current:
        out.append(current)
    return out


class _Budget:
    def __init__(self, requests: int) -> None:
        self.left = requests


class _Stop(Exception):
    """Langfuse stayed unreachable: the rest of the call is undelivered."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class ScorePoster:
    def __init__(
        self,
        *,
        transport: Transport,
        api: AsyncLangfuseAPI,
        settings: LangfuseSettings,
        generation: ApiGeneration,
    ) -> None:
        self._transport = transport
        self._api = api
        self._settings = settings
        self.generation = generation
        #: Known score configs by name (from ``ensure_score_configs``): fill ``configId``, check ranges.
        self.configs: dict[str, ScoreConfig] = {}

    def _config_for(self, score: ScoreToPost) -> ScoreConfig | None:
        if score.config_id is not None:
            return next((c for c in self.configs.values() if c.id == score.config_id), None)
        return self.configs.get(score.name)

    def prepare(self, scores: Sequence[ScoreToPost], report: DeliveryReport) -> list[_Prepared]:
        """Validated, built and sized scores; the rest go to ``report.rejected`` with the reason."""
        latest: dict[str, int] = {}
        for index, score in enumerate(scores):
            latest[score.id] = index
        prepared: list[_Prepared] = []
        per_score_limit = self._settings.score_batch_max_bytes - self._overhead()
        for index, score in enumerate(scores):
            if latest[score.id] != index:
                report.rejected.append(
                    RejectedScore(score, "superseded by a later score with the same id", "client")
                )
                continue
            config = self._config_for(score)
            problems = validate_score(score, config)
            if problems:
                report.rejected.append(RejectedScore(score, "; ".join(problems), "client"))
                continue
            config_id = score.config_id or (config.id if config is not None else None)
            body = (
                v4_body(score, config_id)
                if self.generation is ApiGeneration.V4
                else v3_event(score, config_id)
            )
            size = json_size(body)
            if size > per_score_limit:
                reason = (
                    f"the score is {size} bytes as JSON, over the {per_score_limit}-byte limit of one request"
                )
                report.rejected.append(RejectedScore(score, reason, "client"))
                continue
            prepared.append(_Prepared(score, body, size))
        return prepared

    def _overhead(self) -> int:
        return 2 if self.generation is ApiGeneration.V4 else len('{"batch":[]}')

    async def post(self, scores: Sequence[ScoreToPost]) -> DeliveryReport:
        """Send every valid score; account for each in the returned report (see :class:`DeliveryReport`).

        Raises only when nothing can work: bad credentials (:class:`LangfuseAuthError`) or an endpoint
        this server does not have (:class:`LangfuseNotFoundError`).
        """
        report = DeliveryReport()
        prepared = self.prepare(scores, report)
        groups = batches(
            prepared,
            max_count=self._settings.score_batch_size,
            max_bytes=self._settings.score_batch_max_bytes,
            overhead=self._overhead(),
        )
        budget = _Budget(self._settings.score_bisect_max_requests)
        for number, batch in enumerate(groups):
            try:
                if self.generation is ApiGeneration.V4:
                    await self._send_v4(batch, report, budget)
                else:
                    await self._send_v3(batch, report)
            except _Stop as stop:
                report.errors.append(str(stop.error))
                done = _accounted(report)
                report.undelivered += [
                    p.score for rest in groups[number:] for p in rest if id(p.score) not in done
                ]
                break
        return report

    async def _post(self, send: Callable[[], Awaitable[T]]) -> T | LangfuseHTTPError:
        """``send()``; an invalid-list status is returned (to bisect), a dead Langfuse stops the call."""
        try:
            return await send()
        except (LangfuseAuthError, LangfuseNotFoundError):
            raise
        except LangfuseTransportError as error:
            raise _Stop(error) from None
        except LangfuseHTTPError as error:
            if error.status in _INVALID_LIST_STATUSES:
                return error
            raise _Stop(error) from None

    async def _send_v4(self, batch: list[_Prepared], report: DeliveryReport, budget: _Budget) -> None:
        requests = [_create_request(p.body, p.score) for p in batch]

        async def send() -> Answer[Any]:
            return await self._transport.call(
                SCORES_CREATE,
                lambda options: self._api.scores.with_raw_response.create(
                    request=requests, request_options=options
                ),
            )

        outcome = await self._post(send)
        report.requests += 1
        if isinstance(outcome, LangfuseHTTPError):
            accepted, rejected, messages = 0, len(batch), [outcome.message]
        elif outcome.status == 207:
            body = outcome.body
            accepted, rejected = int(body.get("accepted", 0)), int(body.get("rejected", 0))
            messages = [error_message(e, 207) for e in body.get("errors") or []]
        else:
            report.accepted += [p.score for p in batch]
            return
        if rejected == 0:
            report.accepted += [p.score for p in batch]
            return
        reason = "; ".join(dict.fromkeys(messages)) or "rejected by Langfuse (no message)"
        if accepted == 0 and (len(batch) == 1 or not isinstance(outcome, LangfuseHTTPError)):
            report.rejected += [RejectedScore(p.score, reason, "server") for p in batch]
            return
        if len(batch) > 1 and budget.left >= 2:
            budget.left -= 2
            middle = len(batch) // 2
            await self._send_v4(batch[:middle], report, budget)
            await self._send_v4(batch[middle:], report, budget)
            return
        report.unattributed.append(
            UnattributedBatch(
                tuple(p.score for p in batch), accepted, rejected, tuple(dict.fromkeys(messages))
            )
        )

    async def _send_v3(self, batch: list[_Prepared], report: DeliveryReport) -> None:
        events = [p.body for p in batch]

        async def send() -> LegacyAnswer:
            return await self._transport.legacy(
                INGESTION, INGESTION.path, body={"batch": events}, accept=(207,)
            )

        outcome = await self._post(send)
        report.requests += 1
        if isinstance(outcome, LangfuseHTTPError):
            raise _Stop(outcome)
        body = outcome.body if isinstance(outcome.body, Mapping) else {}
        succeeded = {str(s.get("id")) for s in body.get("successes") or [] if isinstance(s, Mapping)}
        failed = {str(e.get("id")): e for e in body.get("errors") or [] if isinstance(e, Mapping)}
        for item in batch:
            event_id = item.body["id"]
            if event_id in failed:
                error = failed[event_id]
                status = int(error.get("status") or 0)
                message = error_message(error, status)
                if status == 429 or status >= 500:
                    report.undelivered.append(item.score)
                    report.errors.append(f"{INGESTION.label}: event {event_id}: HTTP {status}: {message}")
                else:
                    report.rejected.append(RejectedScore(item.score, f"HTTP {status}: {message}", "server"))
            elif event_id in succeeded:
                report.accepted.append(item.score)
            else:
                report.undelivered.append(item.score)
                report.errors.append(f"{INGESTION.label}: event {event_id} missing from the answer")


def _accounted(report: DeliveryReport) -> set[int]:
    """Identities of the scores that already have an outcome (a batch may stop half-way through bisection)."""
    done = {id(s) for s in report.accepted} | {id(r.score) for r in report.rejected}
    return done | {id(s) for u in report.unattributed for s in u.scores}

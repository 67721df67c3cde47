"""Posting scores: validate, build, batch under the body limit, send, and account for every score.

Two ways in, chosen from the server's version (:mod:`.server`):

- ``POST /api/public/scores`` with a JSON list (Cloud, self-hosted ≥ 4.59). 202: all accepted. 207:
  ``accepted``/``rejected`` counts and messages *without* indices — the batch is never blindly resent;
  it is bisected (halves resent: safe, the ids make a resend an overwrite) until each rejected score is
  found, within a request budget; what the budget does not cover is reported as an unattributed batch.
  A 400/422 on a whole list is bisected the same way (one bad element can fail a list).
- ``POST /api/public/ingestion`` with ``score-create`` events (every other server: 2.x, 3.x, 4.x before
  the list endpoint, whose ``POST /scores`` takes one object and drops the timestamp); its 207 names
  each event, so each score's fate is known without bisecting. The event ``timestamp`` is the score's
  timestamp (Langfuse takes it from the envelope).

A request refused **as a whole** for its shape — 404/405 (no such route), 400/422 on an ingestion
envelope, or 400/422 on every list with nothing of the call accepted — is no verdict on the scores: it
raises :class:`LangfuseContractError` and nothing is settled. Only per-score answers (a 207's detail, a
per-event error, a bisected single score refused while others of the call went through) reject a score.
413: the batch is halved and sent again. 429/5xx/timeouts are retried by the transport; if Langfuse
stays down, this batch and the rest are reported undelivered (safe to post again later) — never dropped.

Langfuse *merges* a re-posted score into the stored one (absent fields keep their old values, metadata
is deep-merged): so every field is sent, ``null`` where there is no value, and nested metadata values
go as JSON text — a re-score that drops a comment or a detail leaves nothing stale behind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from langfuse.api.core.datetime_utils import serialize_datetime

from trace_scorer.config.langfuse import LangfuseSettings
from trace_scorer.data import jsonbytes
from trace_scorer.langfuse.errors import (
    LangfuseAuthError,
    LangfuseContractError,
    LangfuseHTTPError,
    LangfuseTransportError,
)
from trace_scorer.langfuse.http.endpoints import INGESTION, SCORES_CREATE, Endpoint
from trace_scorer.langfuse.http.transport import PlainAnswer, Transport, error_message
from trace_scorer.langfuse.server.capabilities import ScorePosting
from trace_scorer.langfuse.types import (
    DeliveryReport,
    RejectedScore,
    ScoreConfig,
    ScoreToPost,
    UnattributedBatch,
)
from trace_scorer.langfuse.writes.ids import format_timestamp, ingestion_event_id, normalize_timestamp
from trace_scorer.langfuse.writes.score_validation import validate_score

#: Statuses of a whole request that mean "something in this request is invalid".
_INVALID_STATUSES = frozenset({400, 422})
#: A route this server does not have: never a verdict on the scores.
_NO_ROUTE_STATUSES = frozenset({404, 405, 501})
_TOO_LARGE = 413


@dataclass(frozen=True, slots=True)
class _Prepared:
    score: ScoreToPost
    #: The JSON sent for this score (list element, or the ingestion event).
    body: dict[str, Any]
    #: ``body`` encoded, as sent (:func:`wire_json`); requests join these.
    wire: bytes

    @property
    def size(self) -> int:
        return len(self.wire)


def wire_json(value: Any, *, plain: bool | None = None) -> bytes:
    """``value`` as httpx encodes a JSON body (compact, UTF-8, no ASCII escaping, NaN refused): encoded
    once per score, sized from these bytes and sent as they are. orjson (a tenth of the time) where its
    output is these very bytes (:func:`jsonbytes.plain`; ``plain``: already known), the standard library
    otherwise."""
    if jsonbytes.plain(value) if plain is None else plain:
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:  # a lone surrogate: the standard library's error, as before
            pass
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


#: What the standard library's ``ensure_ascii`` escapes that orjson writes as it is: DEL and non-ASCII.
_NOT_ASCII = re.compile("[\x7f-\U0010ffff]")


def _ascii_escape(match: re.Match[str]) -> str:
    """One character as ``json.dumps`` escapes it: ``\\u00b7``, a surrogate pair past U+FFFF."""
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def _canonical(value: Any, *, plain: bool | None = None) -> str:
    """``value`` as ``json.dumps(value, sort_keys=True, separators=(",", ":"))``: the input of an event's
    id, so it must stay these very characters (a changed id would make a re-post a new event). orjson's
    sorted output is the same text for plain values (``plain``: already known) once DEL and non-ASCII
    characters, which only the standard library escapes, are escaped as it does (a KPI's comment has a
    ``·``); otherwise the standard library."""
    if jsonbytes.plain(value) if plain is None else plain:
        try:
            encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass
        else:
            if encoded.isascii() and b"\x7f" not in encoded:
                return encoded.decode()
            return _NOT_ASCII.sub(_ascii_escape, encoded.decode())
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _wire_value(score: ScoreToPost) -> float | str:
    if score.data_type in ("NUMERIC", "BOOLEAN"):
        return float(score.value)
    return str(score.value)


def wire_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata with nested values as JSON text: Langfuse deep-merges a re-posted score's metadata into
    the stored one, so a nested object would keep keys a re-score dropped; a text leaf is replaced whole.
    (Langfuse stores score metadata values as strings anyway.)"""
    return {
        # Text and null first, without the union's isinstance check: the worker's metadata is all text.
        key: value if type(value) is str or value is None or not isinstance(value, dict | list) else _text(value)
        for key, value in metadata.items()
    }


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def score_fields(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """The score's fields in Langfuse's camelCase, without the timestamp.

    The subject's absent parts are left out (Langfuse requires exactly one subject); ``comment`` and
    ``metadata`` are always sent, ``null`` when empty, so a re-post overwrites what an earlier post left.
    """
    fields = _fields(score, config_id)
    if score.metadata is not None:
        fields["metadata"] = wire_metadata(score.metadata)
    return fields


def _fields(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """:func:`score_fields` with ``metadata`` null (set in its place after: the keys keep their order).
    Field by field, in the order sent (every score posted comes through here)."""
    subject = score.subject
    fields: dict[str, Any] = {"id": score.id}
    if subject.trace_id is not None:
        fields["traceId"] = subject.trace_id
    if subject.observation_id is not None:
        fields["observationId"] = subject.observation_id
    if subject.dataset_run_id is not None:
        fields["datasetRunId"] = subject.dataset_run_id
    # A session score posted on one of its traces (2.x) names the session in its metadata only.
    if subject.session_id is not None and subject.trace_id is None:
        fields["sessionId"] = subject.session_id
    fields["name"] = score.name
    fields["value"] = _wire_value(score)
    fields["dataType"] = score.data_type
    fields["comment"] = score.comment
    fields["metadata"] = None
    if score.environment is not None:
        fields["environment"] = score.environment
    if config_id is not None:
        fields["configId"] = config_id
    return fields


def _plain_fields(
    score: ScoreToPost, config_id: str | None, metadata_plain: bool | None
) -> tuple[dict[str, Any], bool]:
    """:func:`score_fields` and whether they are plain (:func:`jsonbytes.plain`). ``metadata_plain``: the
    score's metadata known plain or not (None: not known). Plain metadata stays plain on the wire (its
    nested values become text), so it is not walked a second time."""
    fields = _fields(score, config_id)
    plain = jsonbytes.plain(fields)  # the metadata null here
    if score.metadata is not None:
        metadata = fields["metadata"] = wire_metadata(score.metadata)
        if plain and not metadata_plain:
            plain = jsonbytes.plain(metadata)
    return fields, plain


def list_element(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """One element of the ``POST /scores`` list (its ``timestamp`` makes a re-post an overwrite)."""
    return _list_element(score, config_id)[0]


def _list_element(
    score: ScoreToPost, config_id: str | None, metadata_plain: bool | None = None
) -> tuple[dict[str, Any], bool]:
    """:func:`list_element` and whether it is plain (:func:`jsonbytes.plain`: its timestamp is text)."""
    fields, plain = _plain_fields(score, config_id, metadata_plain)
    fields["timestamp"] = serialize_datetime(normalize_timestamp(score.timestamp))
    return fields, plain


def ingestion_event(score: ScoreToPost, config_id: str | None) -> dict[str, Any]:
    """One ``score-create`` ingestion event; its id is stable for the same content (see ids)."""
    return _ingestion_event(score, config_id)[0]


def _ingestion_event(
    score: ScoreToPost, config_id: str | None, metadata_plain: bool | None = None
) -> tuple[dict[str, Any], bool]:
    """:func:`ingestion_event` and whether it is plain: its body is checked once for the id's JSON and
    the event's (the envelope's other fields are text)."""
    body, plain = _plain_fields(score, config_id, metadata_plain)
    timestamp = format_timestamp(score.timestamp)
    canonical = _canonical({"timestamp": timestamp, "body": body}, plain=plain)
    event = {
        "id": ingestion_event_id(score.id, canonical),
        "type": "score-create",
        "timestamp": timestamp,
        "body": body,
    }
    return event, plain


def batches(prepared: Sequence[_Prepared], *, max_count: int, max_bytes: int, overhead: int) -> list[list[_Prepared]]:
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


class _Call:
    """One ``post_scores`` call: its report, its bisection budget, and what the server said overall."""

    def __init__(self, requests: int) -> None:
        self.report = DeliveryReport()
        self.budget_left = requests
        #: A whole request refused as invalid (400/422): the message, kept until something is accepted.
        self.refused: LangfuseHTTPError | None = None


class _Stop(Exception):
    """Langfuse stayed unreachable: the rest of the call is undelivered."""

    def __init__(self, error: Exception) -> None:
        self.error = error


class ScorePoster:
    def __init__(
        self,
        *,
        transport: Transport,
        settings: LangfuseSettings,
        posting: ScorePosting,
        server_version: str = "unknown",
    ) -> None:
        self._transport = transport
        self._settings = settings
        self.posting = posting
        self._server_version = server_version
        #: Known score configs by name (from ``ensure_score_configs``): fill ``configId``, check ranges.
        self.configs: dict[str, ScoreConfig] = {}
        #: 2.x rejects values equal to a config's bounds (see :mod:`.server`).
        self.exclusive_ranges = False
        #: Score names the server rejected whole in a list: later posts send them in lists of their own,
        #: so they never mix with (and force a bisection of) the scores that go through.
        self.rejected_names: set[str] = set()

    @property
    def endpoint(self) -> Endpoint:
        return SCORES_CREATE if self.posting is ScorePosting.SCORES_BATCH else INGESTION

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
        build = _list_element if self.posting is ScorePosting.SCORES_BATCH else _ingestion_event
        for index, score in enumerate(scores):
            if latest[score.id] != index:
                report.rejected.append(RejectedScore(score, "superseded by a later score with the same id", "client"))
                continue
            config = self._config_for(score)
            metadata_plain = score.metadata is not None and jsonbytes.plain(score.metadata)
            problems = validate_score(score, config, metadata_plain=metadata_plain)
            if problems:
                report.rejected.append(RejectedScore(score, "; ".join(problems), "client"))
                continue
            config_id = score.config_id or (config.id if config is not None else None)
            if self.exclusive_ranges and config_id is not None and _on_bound(score, config):
                config_id = None  # 2.x would reject the bound itself: post it unlinked rather than lose it
            body, plain = build(score, config_id, metadata_plain)
            wire = wire_json(body, plain=plain)
            if len(wire) > per_score_limit:
                reason = f"the score is {len(wire)} bytes as JSON, over the {per_score_limit}-byte limit of one request"
                report.rejected.append(RejectedScore(score, reason, "client"))
                continue
            prepared.append(_Prepared(score, body, wire))
        return prepared

    def _overhead(self) -> int:
        return 2 if self.posting is ScorePosting.SCORES_BATCH else len('{"batch":[]}')

    async def post(self, scores: Sequence[ScoreToPost]) -> DeliveryReport:
        """Send every valid score; account for each in the returned report (see :class:`DeliveryReport`).

        Raises only when nothing can work: bad credentials (:class:`LangfuseAuthError`), or a request
        the server refuses as a whole (:class:`LangfuseContractError`; nothing is settled then).
        """
        call = _Call(self._settings.score_bisect_max_requests)
        report = call.report
        prepared = self.prepare(scores, report)
        suspect = [p for p in prepared if p.score.name in self.rejected_names]
        clean = [p for p in prepared if p.score.name not in self.rejected_names]
        groups = [
            group
            for part in (clean, *_by_name(suspect))
            for group in batches(
                part,
                max_count=self._settings.score_batch_size,
                max_bytes=self._settings.score_batch_max_bytes,
                overhead=self._overhead(),
            )
        ]
        for number, batch in enumerate(groups):
            try:
                await self._send(batch, call)
            except _Stop as stop:
                report.errors.append(str(stop.error))
                done = _accounted(report)
                report.undelivered += [p.score for rest in groups[number:] for p in rest if id(p.score) not in done]
                break
        if call.refused is not None and not report.accepted:
            raise self._contract_error(call.refused)
        return report

    def _contract_error(self, error: LangfuseHTTPError) -> LangfuseContractError:
        return LangfuseContractError(
            endpoint=error.endpoint, server_version=self._server_version, detail=f"HTTP {error.status}: {error.message}"
        )

    async def _request(self, body: bytes) -> PlainAnswer | LangfuseHTTPError:
        """Send one request (its JSON already encoded); a whole-request 4xx comes back as the error (to
        bisect, split or judge), a dead Langfuse stops the call, a missing route raises."""
        try:
            return await self._transport.plain(self.endpoint, self.endpoint.path, encoded=body, accept=(207,))
        except LangfuseAuthError:
            raise
        except LangfuseTransportError as error:
            raise _Stop(error) from None
        except LangfuseHTTPError as error:
            if error.status in _NO_ROUTE_STATUSES:
                raise self._contract_error(error) from None
            if error.status in _INVALID_STATUSES or error.status == _TOO_LARGE:
                return error
            raise _Stop(error) from None

    async def _send(self, batch: list[_Prepared], call: _Call) -> None:
        if self.posting is ScorePosting.SCORES_BATCH:
            await self._send_list(batch, call)
        else:
            await self._send_events(batch, call)

    async def _halves(self, batch: list[_Prepared], call: _Call) -> None:
        middle = len(batch) // 2
        await self._send(batch[:middle], call)
        await self._send(batch[middle:], call)

    async def _send_list(self, batch: list[_Prepared], call: _Call) -> None:
        report = call.report
        outcome = await self._request(b"[" + b",".join(p.wire for p in batch) + b"]")
        report.requests += 1
        if isinstance(outcome, LangfuseHTTPError):
            if outcome.status == _TOO_LARGE and len(batch) > 1:
                await self._halves(batch, call)
                return
            message = f"HTTP {outcome.status}: {outcome.message}"
            if outcome.status == _TOO_LARGE:
                report.rejected.append(RejectedScore(batch[0].score, message, "server"))
                return
            # Refused as a request. A verdict on the scores only if the same shape went through for other
            # scores of this call (checked in post()); otherwise this server may not take the shape at all.
            call.refused = call.refused or outcome
            if len(batch) > 1 and call.budget_left >= 2:  # one bad element can fail a list: find it
                call.budget_left -= 2
                await self._halves(batch, call)
            elif len(batch) == 1:
                report.rejected.append(RejectedScore(batch[0].score, message, "server"))
            else:
                report.unattributed.append(UnattributedBatch(tuple(p.score for p in batch), 0, len(batch), (message,)))
            return
        if outcome.status != 207:
            report.accepted += [p.score for p in batch]
            return
        body = outcome.body if isinstance(outcome.body, Mapping) else {}
        accepted, rejected = int(body.get("accepted", 0)), int(body.get("rejected", 0))
        messages = [error_message(e, 207) for e in body.get("errors") or []]
        if rejected == 0:
            report.accepted += [p.score for p in batch]
            return
        reason = "; ".join(dict.fromkeys(messages)) or "rejected by Langfuse (no message)"
        if accepted == 0:
            report.rejected += [RejectedScore(p.score, reason, "server") for p in batch]
            if len(names := {p.score.name for p in batch}) == 1:
                self.rejected_names |= names  # sent on its own from now on: no more bisecting for it
            return
        by_name = _by_name(batch)
        if len(by_name) > 1 and call.budget_left >= len(by_name):
            # A server that refuses a score usually refuses its name (its config, its type): one request
            # per name finds such a name at once, where halving a mixed list could take dozens.
            call.budget_left -= len(by_name)
            for group in by_name:
                await self._send_list(group, call)
            return
        if len(batch) > 1 and call.budget_left >= 2:
            call.budget_left -= 2
            await self._halves(batch, call)
            return
        report.unattributed.append(
            UnattributedBatch(tuple(p.score for p in batch), accepted, rejected, tuple(dict.fromkeys(messages)))
        )

    async def _send_events(self, batch: list[_Prepared], call: _Call) -> None:
        report = call.report
        outcome = await self._request(b'{"batch":[' + b",".join(p.wire for p in batch) + b"]}")
        report.requests += 1
        if isinstance(outcome, LangfuseHTTPError):
            if outcome.status == _TOO_LARGE and len(batch) > 1:
                await self._halves(batch, call)
                return
            # Ingestion answers per event: a refused envelope is the request's shape, not the scores.
            raise self._contract_error(outcome)
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


def _by_name(prepared: Sequence[_Prepared]) -> list[list[_Prepared]]:
    """``prepared`` grouped by score name, in order of first appearance."""
    groups: dict[str, list[_Prepared]] = {}
    for item in prepared:
        groups.setdefault(item.score.name, []).append(item)
    return list(groups.values())


def _on_bound(score: ScoreToPost, config: ScoreConfig | None) -> bool:
    if config is None or score.data_type != "NUMERIC" or not isinstance(score.value, int | float):
        return False
    return score.value in (config.min_value, config.max_value)


def _accounted(report: DeliveryReport) -> set[int]:
    """Identities of the scores that already have an outcome (a batch may stop half-way through bisection)."""
    done = {id(s) for s in report.accepted} | {id(r.score) for r in report.rejected}
    return done | {id(s) for u in report.unattributed for s in u.scores}

"""Score a batch of samples, post their scores, and record what happened — the step both sources share.

The rules that keep scores neither lost nor duplicated:
- a trace enters the ledger (scored with this configuration) only once every one of its scores has a
  final answer from Langfuse (accepted, or rejected for good);
- a trace whose scores are not known to have arrived stays out of the ledger and the caller does not move
  its watermark; posting again later overwrites (same ids, same timestamps);
- a trace with a failed metric (e.g. every judge model down) keeps the scores that succeeded and gets a
  next-try time with exponential back-off, until ``max_tries``; its failure never holds the watermark;
- a chunk Langfuse answered for but the state could not record (disk full, database away: a
  :class:`StateError`) is kept in memory and written before anything else is posted for the target, so
  a failing state stops the target instead of posting the same window again every tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from trace_scorer.config.targets import TargetSettings
from trace_scorer.data.outcomes import Failed, Score
from trace_scorer.langfuse import DeliveryReport, LangfuseClient, ScoreSubject, ScoreToPost
from trace_scorer.ops.telemetry import Telemetry
from trace_scorer.providers.deadline import Deadline, system_deadline
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline, SampleResult
from trace_scorer.scoring.plan import TargetPlan
from trace_scorer.state import StateError, StateStore
from trace_scorer.worker.scores import scores_to_post
from trace_scorer.worker.tick import Tick, TickReport

log = structlog.get_logger(__name__)

#: Seconds without a new result after which the complete traces in hand are posted: with a fast judge
#: results follow each other in milliseconds and a chunk fills a score request; with a slow one (a
#: local model: a result every few seconds) each trace goes out soon after its last score.
FLUSH_STALL = 1.0
#: Seconds a complete trace waits at most for others to share its score request (results that come just
#: often enough never to stall).
FLUSH_AT_MOST = 10.0


def settling_unit(subject: ScoreSubject) -> ScoreSubject:
    """The scores that settle together: a session's, or a trace's with all of its observations' (an
    observation's undelivered score keeps its whole trace out of the ledger)."""
    return replace(subject, observation_id=None) if subject.observation_id is not None else subject


@dataclass(frozen=True)
class WorkItem:
    """A sample ready to score, with what its scores need (subject, deterministic timestamp)."""

    sample: Sample
    #: The trace's start time: part of Langfuse's upsert key, so it must never change between runs.
    timestamp: datetime
    environment: str | None = None
    #: What a retry needs to fetch the trace again (e.g. the root row, as JSON): encoded only for a trace
    #: that failed (most never do), so a callable.
    payload: Callable[[], str] | None = None
    #: What the scores are attached to; None: the sample's trace (and ``observation_id``).
    scored: ScoreSubject | None = None
    #: The ledger entries recorded once its scores settled; None: its trace (a session: each of its traces).
    ledger: tuple[str, ...] | None = None
    #: The observation the scores go on (``scope = "observation"``); None: the trace.
    observation_id: str | None = None
    #: How many items the trace gives (one per observation sample; 1 for a trace). A trace's items are
    #: posted in one chunk and recorded in the ledger together, once all of them are scored.
    parts: int = 1

    @property
    def trace_id(self) -> str:
        """The subject's key in the state (failures, ledger): the trace's id, a session's id."""
        return self.sample.trace_id or self.sample.id

    @property
    def subject(self) -> ScoreSubject:
        return self.scored or ScoreSubject.trace(self.trace_id, self.observation_id)

    @property
    def unit(self) -> ScoreSubject:
        """What settles together: a session, or a trace with all of its observations."""
        return settling_unit(self.subject)


def unsettled_reason(delivery: DeliveryReport) -> str:
    """Why a delivery is not complete, as /readyz and the log show it."""
    parts = []
    if delivery.undelivered:
        parts.append(f"{len(delivery.undelivered)} scores undelivered: {'; '.join(delivery.errors[-3:]) or 'unknown'}")
    if delivery.unattributed:
        scores = sum(len(b.scores) for b in delivery.unattributed)
        messages = "; ".join(dict.fromkeys(m for b in delivery.unattributed for m in b.messages)) or "no message"
        parts.append(f"{scores} scores in lists Langfuse accepted only partly without saying which ({messages})")
    return "; ".join(parts) or "delivery incomplete"


async def _as_async(items: Iterable[WorkItem] | AsyncGenerator[WorkItem, None]) -> AsyncGenerator[WorkItem, None]:
    if isinstance(items, AsyncGenerator):
        async with aclosing(items):
            async for item in items:
                yield item
    else:
        for item in items:
            yield item


class _Next:
    """The next result of a stream, awaited in a task of its own so that waiting for it can time out
    without cancelling the stream (an async generator cancelled mid-``anext`` is closed)."""

    def __init__(self, results: AsyncGenerator[SampleResult, None]) -> None:
        self._results = results
        self._task: asyncio.Task[SampleResult] | None = None

    def _next(self) -> asyncio.Task[SampleResult]:
        if self._task is None:
            self._task = asyncio.ensure_future(anext(self._results))
        return self._task

    def ready(self) -> bool:
        return self._next().done()

    async def wait(self) -> None:
        await asyncio.wait({self._next()})

    async def take(self) -> SampleResult | None:
        """The next result; None at the end of the stream. Cancelled meanwhile, the task is kept for
        :meth:`cancel` to wait for (the stream must not be closed while its ``anext`` still runs)."""
        try:
            result = await self._next()
        except StopAsyncIteration:
            result = None
        self._task = None
        return result

    async def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class LangfuseUnavailable(Exception):
    """Scores could not be delivered after the retries: stop the tick, keep the watermark, try again later."""


class BatchScorer:
    """Scores and posts batches for one target."""

    def __init__(
        self,
        target: TargetSettings,
        plan: TargetPlan,
        pipeline: Pipeline,
        client: LangfuseClient,
        state: StateStore,
        telemetry: Telemetry,
        *,
        concurrency: int,
        progress: Callable[[], None] | None = None,
    ) -> None:
        self.target = target
        self.plan = plan
        self.pipeline = pipeline
        self.client = client
        self.state = state
        self.telemetry = telemetry
        self.concurrency = concurrency
        self._progress = progress
        #: A chunk of complete traces goes out once no further result came for ``flush_stall`` seconds, or
        #: once its first trace has waited ``flush_at_most``, whether or not it fills a score request.
        self.flush_stall = FLUSH_STALL
        self.flush_at_most = FLUSH_AT_MOST
        #: Bounds those waits (``asyncio.timeout``; tests expire it on an event), and tells a chunk's age.
        self.deadline: Deadline = system_deadline
        self.clock: Callable[[], float] = time.monotonic
        #: (score name, reason) of rejections already logged at error level.
        self._reported: set[tuple[str, str]] = set()
        #: Ledger writes of chunks Langfuse answered for that the state refused, oldest first.
        self._unrecorded: list[Callable[[], None]] = []

    def record_unrecorded(self) -> None:
        """Write what was posted but not recorded, before anything new is posted for the target (each write
        in its own transaction, oldest first). Raises :class:`StateError` while the state refuses it."""
        while self._unrecorded:
            self.state.run_in_transaction(self._unrecorded[0])
            self._unrecorded.pop(0)
            log.info("state_write_recovered", target=self.target.name, left=len(self._unrecorded))

    def progress(self) -> None:
        """The tick is moving (a trace listed, fetched or scored, a batch posted): liveness must know,
        or a long tick working through a backlog looks like a stalled scheduler."""
        if self._progress is not None:
            self._progress()

    async def run(
        self,
        items: Iterable[WorkItem] | AsyncGenerator[WorkItem, None],
        tick: Tick,
        *,
        on_settled: Callable[[Sequence[SampleResult]], None] | None = None,
    ) -> None:
        """Score ``items`` as they come, post their scores in chunks as results are ready, record each
        chunk once Langfuse has answered for it. Raises :class:`LangfuseUnavailable` when a chunk's
        delivery is incomplete (after recording what did settle; the items not scored yet are left).

        Why chunks: posting the whole batch after its last judge call leaves the judge idle while the
        scores go out; a chunk is as many whole traces as fit in one score request
        (``langfuse.score_batch_size``), so the request count stays that of one post per full request.
        A chunk does not wait for a slow judge to fill it, though: it goes out once the results stall
        (:meth:`_arrives`), so each trace's scores are in Langfuse soon after its last one is computed.
        ``on_settled`` is called with each chunk's settled results inside the ledger's transaction."""
        #: Items by their sample object (a result carries it): two items may share a sample id.
        waiting: dict[int, WorkItem] = {}

        async def samples() -> AsyncGenerator[Sample, None]:
            async for item in _as_async(items):
                waiting[id(item.sample)] = item
                yield item.sample

        limit = self.client.settings.score_batch_size
        chunk: list[tuple[WorkItem, SampleResult]] = []
        posts: list[ScoreToPost] = []
        #: Results of traces with items still being scored (observation samples), by trace.
        partial: dict[str, list[tuple[WorkItem, SampleResult, list[ScoreToPost]]]] = {}
        held_since = 0.0  # when the chunk's first trace was complete
        async with aclosing(self.pipeline.score_stream(samples(), concurrency=self.concurrency)) as results:
            coming = _Next(results)
            try:
                while True:
                    if chunk and not await self._arrives(coming, held_since):
                        await self._deliver(chunk, posts, tick, on_settled)
                        chunk, posts = [], []
                        continue
                    result = await coming.take()
                    if result is None:
                        break
                    self.progress()
                    item = waiting.pop(id(result.sample))
                    scores = scores_to_post(self.plan, result.outcomes, item.subject, item.timestamp, item.environment)
                    parts = partial.setdefault(item.trace_id, [])
                    parts.append((item, result, scores))
                    if len(parts) < item.parts:
                        continue  # the trace's other samples are still being scored
                    del partial[item.trace_id]
                    unit = [score for _, _, trace_scores in parts for score in trace_scores]
                    if chunk and len(posts) + len(unit) > limit:
                        await self._deliver(chunk, posts, tick, on_settled)
                        chunk, posts = [], []
                    if not chunk:
                        held_since = self.clock()
                    chunk += [(part, part_result) for part, part_result, _ in parts]
                    posts += unit
            finally:
                await coming.cancel()
        if chunk:
            await self._deliver(chunk, posts, tick, on_settled)

    async def _arrives(self, coming: _Next, held_since: float) -> bool:
        """Whether the next result (or the stream's end) comes before the chunk in hand must go out: within
        :attr:`flush_stall` (the stream stalls: the judge is the bottleneck, nothing will join the chunk
        soon) and before its first trace has waited :attr:`flush_at_most` (results trickle in just faster
        than the stall)."""
        if coming.ready():
            return True
        held = self.clock() - held_since
        seconds = min(self.flush_stall, self.flush_at_most - held)
        if seconds <= 0:
            return False
        with contextlib.suppress(TimeoutError):
            async with self.deadline(seconds):
                await coming.wait()
        return coming.ready()

    async def _deliver(
        self,
        chunk: Sequence[tuple[WorkItem, SampleResult]],
        posts: Sequence[ScoreToPost],
        tick: Tick,
        on_settled: Callable[[Sequence[SampleResult]], None] | None,
    ) -> None:
        """Post one chunk's scores and record the traces whose scores all have a final answer."""
        report = tick.report
        self.record_unrecorded()
        delivery = await self.client.post_scores(posts) if posts else DeliveryReport()
        self.progress()
        self.count_delivery(delivery, report)

        unsettled = {settling_unit(s.subject) for s in delivery.undelivered}
        unsettled |= {settling_unit(s.subject) for batch in delivery.unattributed for s in batch.scores}
        settled: list[SampleResult] = []
        #: Traces (each with all of its items: a chunk holds whole traces) done, and failed with why.
        done: dict[str, None] = {}
        failed: dict[str, tuple[WorkItem, dict[str, str]]] = {}
        for item, result in chunk:
            if item.unit in unsettled:
                continue
            settled.append(result)
            self.telemetry.metric_outcomes(self.target.name, result.outcomes)
            failures = result.reasons(Failed)
            if failures:
                if item.observation_id is not None:  # which observation's metric failed
                    failures = {f"{item.observation_id} {name}": why for name, why in failures.items()}
                _, known = failed.setdefault(item.trace_id, (item, {}))
                known.update(failures)
                report.failed += 1
                self.telemetry.traces_failed(self.target.name, unit=self.target.scope)
            elif any(isinstance(o, Score) for o in result.outcomes.values()):
                for entry in item.ledger or (item.trace_id,):
                    done[entry] = None
                report.scored += 1
                self.telemetry.traces_scored(self.target.name, unit=self.target.scope)
                self.telemetry.trace_scored_at(self.target.name, item.timestamp)
            else:  # every metric skipped: done (in the ledger), but no score was posted for it
                for entry in item.ledger or (item.trace_id,):
                    done[entry] = None
                report.skip_sample("nothing to score")
            for note in result.sample.notes:
                where = {"observation_id": item.observation_id} if item.observation_id else {}
                log.info("extraction_note", target=self.target.name, trace_id=item.trace_id, note=note, **where)
        # A trace with one failed observation is retried whole (its other scores are posted again: an
        # overwrite, same ids); it is not in the ledger until then.
        recorded = [trace_id for trace_id in done if trace_id not in failed]

        def record() -> None:  # one transaction; run again whole if the state refused it
            for item, failures in failed.values():
                self._record_failure(item, failures, tick)
            self.state.record_scored(self.target.name, recorded, self.plan.config_hash, tick.now)
            if on_settled is not None and settled:
                on_settled(settled)

        try:
            self.state.run_in_transaction(record)
        except StateError:
            self._unrecorded.append(record)
            raise
        if not delivery.complete:
            raise LangfuseUnavailable(unsettled_reason(delivery))

    def _record_failure(self, item: WorkItem, failures: dict[str, str], tick: Tick) -> None:
        previous = self.state.failure(self.target.name, item.trace_id)
        tries = (previous.tries if previous else 0) + 1
        give_up = tries >= self.target.max_tries
        next_try = None if give_up else tick.now + timedelta(seconds=self.target.retry_after * 2 ** (tries - 1))
        error = "; ".join(f"{name}: {reason}" for name, reason in sorted(failures.items()))
        payload = item.payload() if item.payload is not None else None
        self.state.record_failure(self.target.name, item.trace_id, error, next_try, payload)
        if give_up:
            tick.report.gave_up += 1
            log.error("trace_given_up", target=self.target.name, trace_id=item.trace_id, tries=tries, error=error)
        else:
            log.warning(
                "trace_failed",
                target=self.target.name,
                trace_id=item.trace_id,
                tries=tries,
                next_try=next_try.isoformat() if next_try else None,
                error=error,
            )

    def count_delivery(self, delivery: DeliveryReport, report: TickReport) -> None:
        """Count and log what Langfuse did with posted scores (rejections are final: logged as errors)."""
        report.scores_posted += len(delivery.accepted)
        report.scores_rejected += len(delivery.rejected)
        if delivery.accepted:
            self.telemetry.scores_posted(self.target.name, len(delivery.accepted))
        rejected_by: Counter[tuple[str, str, str]] = Counter()
        for rejected in delivery.rejected:
            self.telemetry.scores_rejected(self.target.name, rejected.by)
            rejected_by[(rejected.score.name, rejected.by, rejected.reason)] += 1
        for (name, by, reason), count in rejected_by.items():
            # Once per score name and reason: a name Langfuse always refuses must not flood the log.
            first = (name, reason) not in self._reported
            self._reported.add((name, reason))
            (log.error if first else log.debug)(
                "score_rejected", target=self.target.name, score=name, by=by, reason=reason, scores=count
            )
        for batch in delivery.unattributed:
            log.warning(
                "scores_partly_rejected",
                target=self.target.name,
                accepted=batch.accepted,
                rejected=batch.rejected,
                messages=list(batch.messages),
            )

"""Dataset runs (experiments): score each item's trace with the item's expected output, then the run.

Per tick, for the configured datasets: the experiments with activity within ``lookback``, filtered by
name; for each, its items. Items whose trace is not yet in the ledger with this configuration are
scored (their per-trace results kept in state). A group of runs (one run, or all selected runs of a
dataset for pass@k across runs) gets its run-level results — run-level means, group metrics, KPIs — once
none of its runs changed for ``quiet_period``, posted on every run of the group (``datasetRunId``) with
the run's first-seen time as timestamp; more items later re-post them with the same ids (an overwrite).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta

import structlog

from trace_scorer.compare.worker import comparison_scores
from trace_scorer.config.settings import Settings
from trace_scorer.data.patterns import SafePattern
from trace_scorer.extract import extract_sample
from trace_scorer.langfuse import Dataset, Experiment, ExperimentItem, ScoreSubject, TraceRoot
from trace_scorer.langfuse.reads.trace_scan import OversizedTrace
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import SampleResult
from trace_scorer.state import RunState, StoredResult
from trace_scorer.worker.batch import LangfuseUnavailable, WorkItem, unsettled_reason
from trace_scorer.worker.scores import decode_outcomes, encode_outcomes, scores_to_post
from trace_scorer.worker.source import SourceBase
from trace_scorer.worker.tick import Tick, TickReport

log = structlog.get_logger(__name__)


class DatasetRunSource(SourceBase):
    """The ``dataset_runs`` source of one target."""

    def prepare(self, settings: Settings) -> None:
        self._datasets: list[Dataset] | None = None
        self._pattern = SafePattern(self.target.run_name_pattern) if self.target.run_name_pattern else None
        #: Run id → its total item count when its items were last read by this process (v3: an
        #: unchanged total means no new item, and the items are not read again).
        self._read_counts: dict[str, int] = {}
        self._warned_run_scores = False

    def selected(self, experiment: Experiment) -> bool:
        if self.target.run_names is not None and experiment.name not in self.target.run_names:
            return False
        return self._pattern is None or self._pattern.search(experiment.name)

    async def datasets(self) -> list[Dataset]:
        if self._datasets is None:
            self._datasets = [await self.client.reads.get_dataset(name) for name in self.target.datasets]
        return self._datasets

    async def tick(self, now: datetime, stop: asyncio.Event, since: datetime | None = None) -> TickReport:
        tick = self.start_tick(self.present(now), stop)
        now, report = tick.now, tick.report
        self.scorer.record_unrecorded()  # what was posted but not recorded first: its traces are done
        since = since or now - timedelta(seconds=self.target.effective_lookback)
        report.window = f"experiments since {since.isoformat()}"
        # Runs seen that changed within lookback stay followed: a v3 run is listed by creation only.
        tracked = self.state.runs_changed_since(self.target.name, since)
        experiments = [
            e
            async for e in self.client.reads.list_experiments(await self.datasets(), since, tracked=tracked)
            if self.selected(e)
        ]
        retry_due = bool(self.state.due_failures(self.target.name, now, limit=1))
        for experiment in experiments:
            if stop.is_set():
                return report
            if self._unchanged(experiment) and not retry_due:
                report.skipped["run unchanged"] += 1
                continue
            await self._score_items(experiment, since, tick)
        if not stop.is_set():
            await self._post_groups(experiments, tick)
        return report

    def _totals(self, experiment: Experiment) -> int | None:
        """The run's total item count when the reader reports totals (v3), else None."""
        if getattr(self.client.reads, "item_counts_are_totals", False) and experiment.item_count is not None:
            return experiment.item_count
        return None

    def _unchanged(self, experiment: Experiment) -> bool:
        """v3: the run's total is what it was when this process last read its items (nothing new).

        Only counts read by this process count: after a restart (maybe a new configuration) every
        followed run is read once again."""
        total = self._totals(experiment)
        return total is not None and self._read_counts.get(experiment.id) == total

    async def _score_items(self, experiment: Experiment, since: datetime, tick: Tick) -> None:
        now, config_hash = tick.now, tick.plan.config_hash
        items = [i async for i in self.client.reads.list_experiment_items(experiment, since)]
        self.scorer.progress()
        tick.report.seen += len(items)
        tick.telemetry.traces_seen(self.target.name, len(items))
        # The quiet period runs from the last change the worker saw: v3 totals, v4 items in the window.
        total = self._totals(experiment)
        self.state.see_run(self.target.name, experiment.id, len(items) if total is None else total, now)
        known = self.state.scored_hashes(self.target.name, [i.trace_id for i in items])
        failed = self.state.failed_subjects(self.target.name, [i.trace_id for i in items])
        due = {f.subject for f in self.state.due_failures(self.target.name, now, limit=100_000)}
        todo = [
            i for i in items if known.get(i.trace_id) != config_hash and (i.trace_id not in failed or i.trace_id in due)
        ]
        if already := sum(1 for i in items if known.get(i.trace_id) == config_hash):
            tick.report.skipped["already scored"] += already
        for start in range(0, len(todo), self.batch_size):
            if tick.stop.is_set():
                return
            await self._score_batch(experiment, todo[start : start + self.batch_size], tick)
        if total is not None:
            self._read_counts[experiment.id] = total  # every item read was handled: skip until it changes

    def _root(self, item: ExperimentItem) -> TraceRoot:
        """What the trace fetch needs: the trace id and the time span its rows are in."""
        return TraceRoot(
            trace_id=item.trace_id,
            observation_id=item.observation_id or "",
            name=None,
            start_time=item.start_time,
            end_time=item.start_time + timedelta(seconds=self.target.unfinished_after),
            environment=item.environment,
            updated_at=None,
            user_id=None,
            session_id=None,
            tags=(),
            metadata={},
            row={},
        )

    async def _score_batch(self, experiment: Experiment, items: Sequence[ExperimentItem], tick: Tick) -> None:
        traces = {t.trace_id: t async for t in self.client.reads.fetch_traces([self._root(i) for i in items])}
        rows = {trace_id: trace.observations for trace_id, trace in traces.items()}
        self.scorer.progress()
        work = []
        for item in items:
            sample = extract_sample(
                rows.get(item.trace_id, []),
                item=item,
                references=self.target.references,
                trace_id=item.trace_id,
            )
            trace = traces.get(item.trace_id)
            if isinstance(trace, OversizedTrace):
                sample.notes.append(
                    f"the trace has more than {trace.limit} observations (langfuse.max_rows_per_trace): "
                    "scored from the experiment item alone"
                )
            elif not rows.get(item.trace_id):
                sample.notes.append("no observations found for the trace; scored from the experiment item alone")
            start = sample.start_time or item.start_time
            work.append(WorkItem(sample, start, item.environment))

        def save(settled: Sequence[SampleResult]) -> None:
            stored = [
                StoredResult(r.sample.trace_id or r.sample.id, r.sample.item_id, encode_outcomes(r.outcomes))
                for r in settled
            ]
            self.state.save_results(self.target.name, experiment.id, stored)

        await self.scorer.run(work, tick, on_settled=save)

    # -- run level -------------------------------------------------------------------------------

    def _groups(self, experiments: Sequence[Experiment]) -> dict[str, list[Experiment]]:
        groups: dict[str, list[Experiment]] = {}
        for experiment in experiments:
            key = experiment.id if self.target.run_groups == "each" else f"dataset {experiment.dataset_id}"
            groups.setdefault(key, []).append(experiment)
        return groups

    async def _post_groups(self, experiments: Sequence[Experiment], tick: Tick) -> None:
        now = tick.now
        quiet = timedelta(seconds=self.target.quiet_period)
        for key, members in self._groups(experiments).items():
            runs = {}
            for experiment in members:
                run = self.state.run(self.target.name, experiment.id)
                if run is None or run.last_change is None or now - run.last_change < quiet:
                    break  # a run of the group is still receiving items
                runs[experiment.id] = run
            else:
                await self._post_group(key, members, runs, tick)

    def _run_scores_possible(self) -> bool:
        """False on servers that cannot store scores on a dataset run (2.x: no ``datasetRunId``)."""
        return self.client.capabilities.run_scores

    def _warn_no_run_scores(self) -> None:
        if self._warned_run_scores:
            return
        self._warned_run_scores = True
        log.warning(
            "run_scores_not_posted",
            target=self.target.name,
            server_version=self.client.capabilities.describe(),
            reason="this Langfuse version cannot store scores on a dataset run (no datasetRunId; it requires "
            "a traceId): run-level means, group metrics and KPIs are not posted; per-item scores are",
        )

    async def _post_group(self, key: str, members: Sequence[Experiment], runs: dict[str, RunState], tick: Tick) -> None:
        counts = sorted((run_id, run.item_count) for run_id, run in runs.items())
        signature = hashlib.sha256(json.dumps([tick.plan.config_hash, counts]).encode()).hexdigest()[:16]
        if all(run.posted_hash == signature for run in runs.values()):
            return  # posted already for these items and this configuration
        if not self._run_scores_possible():
            self._warn_no_run_scores()
            return
        results = [
            SampleResult(
                Sample(id=stored.subject, trace_id=stored.subject, item_id=stored.item_id, run_id=e.id),
                decode_outcomes(stored.outcomes),
            )
            for e in members
            for stored in self.state.run_results(self.target.name, e.id)
        ]
        if not results:
            return
        group = await self.scorer.pipeline.score_group(key, results)
        posts = []
        for experiment in members:
            posts += scores_to_post(
                tick.plan, group.outcomes, ScoreSubject.run(experiment.id), runs[experiment.id].first_seen
            )
        # compare_to: each run against its baseline, as delta_<name> scores in the same post (docs/compare.md)
        plan, datasets = tick.plan, await self.datasets()
        posts += await comparison_scores(self.target, plan, self.client, self.state, datasets, members, runs)
        accepted = rejected = 0
        if posts:
            delivery = await self.client.post_scores(posts)
            self.scorer.count_delivery(delivery, tick.report)
            if not delivery.complete:
                raise LangfuseUnavailable(f"run-level scores of {key}: {unsettled_reason(delivery)}")
            accepted, rejected = len(delivery.accepted), len(delivery.rejected)
        for experiment in members:
            self.state.set_run_posted(self.target.name, experiment.id, signature)
        tick.report.runs_posted += len(members)
        log.info(
            "run_scored",
            target=self.target.name,
            group=key,
            runs=[e.name for e in members],
            traces=len(results),
            scores=accepted,
            rejected=rejected,
        )

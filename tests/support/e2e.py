"""Helpers of the end-to-end fault and crash tests (``tests/e2e``): ``trace-scorer run`` as a subprocess
against the loopback stand-ins.

The stand-ins run in threads of the test process (cheap to start; the worker is its own process, so a
``kill -9`` hits only the worker). What the worker must end up posting is computed here, locally, the way
the worker computes it: the same corpus (same scenario, same ``end``), the rows as the server serves them
(field groups, metadata cut at 200 characters), the same extraction and deterministic metrics; a judged
metric must be scored wherever it has something to judge (the LLM stand-in always answers, in the end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

from standins.generate import Corpus, Scenario
from standins.handles import LangfuseHandle, OpenAIHandle, wait_until
from standins.langfuse_query import project
from standins.langfuse_server import _truncate_metadata
from standins.worker import PRODUCTION_REFERENCES, WorkerProcess, backlog_timing, production_target
from trace_scorer.config.targets import TargetSettings
from trace_scorer.extract import extract_sample
from trace_scorer.langfuse.reads.v4 import BODY_FIELDS
from trace_scorer.metrics.base import Resources, Score
from trace_scorer.sample import Sample
from trace_scorer.scoring.pipeline import Pipeline
from trace_scorer.scoring.plan import build_plan

#: The criterion of the judged metric the tests use (one LLM call per trace).
POLITE = {"metric": "aspect_critic", "name": "polite", "definition": "The final answer is polite and helpful."}
METRICS: list[str | dict[str, Any]] = ["tool_call_accuracy", "rouge", POLITE]


def backlog(traces: int, **overrides: Any) -> Scenario:
    """``traces`` production traces 1 s apart, the last one started three minutes ago (all have ended),
    with golden references on every root."""
    end = (datetime.now(UTC) - timedelta(minutes=3)).replace(microsecond=0)
    values: dict[str, Any] = {
        "seed": 23,
        "traces": traces,
        "spacing": 1.0,
        "end": end.isoformat(),
        "references_rate": 1.0,
        "datasets": (),
    }
    values.update(overrides)
    return Scenario(**values)


def target_for(scenario: Scenario, metrics: list[str | dict[str, Any]] = METRICS, **options: Any) -> dict[str, Any]:
    """A production target that sees the whole backlog on its first tick."""
    return production_target(metrics, references=PRODUCTION_REFERENCES, **{**backlog_timing(scenario), **options})


def local_samples(scenario: Scenario, target: Mapping[str, Any]) -> dict[str, Sample]:
    """The backlog's samples as the worker extracts them: the rows as the v4 stand-in serves them (the
    body field groups, metadata cut at 200 characters; duplicates aside, which the worker merges)."""
    corpus = Corpus(scenario)
    references = TargetSettings.model_validate(dict(target)).references
    samples = {}
    for trace_id in corpus.expected_scored():
        header = corpus.find(trace_id)
        assert header is not None
        rows = [_truncate_metadata(project(r.row, BODY_FIELDS), set()) for r in corpus.render(header).records]
        samples[trace_id] = extract_sample(rows, references=references, trace_id=trace_id)
    return samples


def local_observation_samples(scenario: Scenario, target: Mapping[str, Any]) -> dict[str, Sample]:
    """scope = "observation": the backlog's observation samples by ``"<trace id>/<observation id>"`` (the
    subject :meth:`LangfuseHandle.scores_by_subject` names), built from the rows as the v4 stand-in
    serves them, with the target's filter."""
    from trace_scorer.extract.observations import observation_samples
    from trace_scorer.worker.observations import observation_filter

    corpus = Corpus(scenario)
    settings = TargetSettings.model_validate(dict(target))
    wanted = observation_filter(settings).matches
    samples = {}
    for trace_id in corpus.expected_scored():
        header = corpus.find(trace_id)
        assert header is not None
        rows = [_truncate_metadata(project(r.row, BODY_FIELDS), set()) for r in corpus.render(header).records]
        for sample in observation_samples(rows, wanted, trace_id=trace_id, references=settings.references):
            samples[f"{trace_id}/{sample.observation_id}"] = sample
    return samples


def expected_scores(scenario: Scenario, target: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """(subject, score name) → 1 for every score the worker must end up posting for the backlog; the
    subject is the trace id, ``"<trace id>/<observation id>"`` for scope = "observation"."""
    settings = TargetSettings.model_validate(dict(target))
    observations = settings.scope == "observation"
    plan = build_plan(settings, index=0, resources=Resources())  # no judge: judged metrics decided below
    pipeline = Pipeline(plan)
    judged = [m.name for m in plan.sample_metrics if not m.deterministic()]

    async def score_all() -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        samples = local_observation_samples(scenario, target) if observations else local_samples(scenario, target)
        for trace_id, sample in samples.items():
            result = await pipeline.score_sample(sample)
            names = {name for name, outcome in result.outcomes.items() if isinstance(outcome, Score)}
            if sample.messages or sample.response is not None:  # as aspect_critic decides
                names.update(judged)
            out.update({(trace_id, name): 1 for name in names})
        return out

    with structlog.testing.capture_logs():  # "judged metrics skipped: no judge" is expected here
        return asyncio.run(score_all())


def stored_counts(lf: LangfuseHandle) -> dict[tuple[str, str], int]:
    """(trace id, score name) → how many scores the stand-in holds for it."""
    return {key: len(scores) for key, scores in lf.scores_by_subject().items()}


@dataclass
class Run:
    """One end-to-end setting: the stand-ins, the scenario, the target, what must be posted."""

    lf: LangfuseHandle
    llm: OpenAIHandle
    scenario: Scenario
    target: dict[str, Any]
    workdir: Path
    expected: dict[tuple[str, str], int] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)

    def worker(self, env: dict[str, str], name: str = "worker") -> WorkerProcess:
        process = WorkerProcess(["run"], env=env, workdir=self.workdir, log_name=f"{name}-{len(self.workers)}.log")
        self.workers.append(process)
        return process.start()

    def stored(self) -> int:
        return int(self.lf.score_summary()["stored"])

    def wait_for_all(self, worker: WorkerProcess, timeout: float) -> bool:
        """Until every expected score is stored (or the worker died, or ``timeout``)."""
        return wait_until(
            lambda: self.stored() >= len(self.expected) or not worker.running(), timeout=timeout, interval=0.25
        )

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log()[-4000:]}" for w in self.workers)


StartRun = Callable[..., Run]


def kill_mid_post(run: Run, worker: WorkerProcess, route: str) -> None:
    """kill -9 ``worker`` while Langfuse holds its score post on ``route`` (a scripted ``hold``), then let
    Langfuse finish that post: its scores are stored, and the worker never saw the answer."""
    lf = run.lf
    assert wait_until(lambda: lf.stats()["held"] == 1, timeout=90), run.logs()
    assert worker.kill9() == -9
    answered = answered_requests(lf, route)
    lf.release()
    assert wait_until(lambda: answered_requests(lf, route) > answered, timeout=30), run.logs()


def answered_requests(lf: LangfuseHandle, route: str) -> int:
    """Requests on ``route`` the stand-in has answered (stored, for a score post), whatever the answer."""
    return sum(lf.stats()["requests"].get(route, {}).values())


def assert_exactly_once(run: Run) -> None:
    """Langfuse holds exactly the expected scores, one each: none missing, none extra, none twice."""
    summary = run.lf.score_summary()
    assert summary["duplicate_count"] == 0, summary["duplicates"][:5]
    counts = stored_counts(run.lf)
    missing = sorted(set(run.expected) - set(counts))
    extra = sorted(set(counts) - set(run.expected))
    assert not missing and not extra, (missing[:10], extra[:10])
    assert set(counts.values()) == {1}

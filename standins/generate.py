"""A seeded generator of realistic agent traces, dataset items and experiments, lazy per trace.

Nothing is held for the whole corpus: trace ``i`` of the production stream is a pure function of
``(seed, i)`` — its start time, its task (a tool-using agent run, sometimes deviated from the ideal), its
format, its rows — computed when asked for (an LRU keeps the recently rendered ones). Start times grow
with ``i``, so "the traces starting in a window" is arithmetic, and a 100,000-trace backlog costs only
what the reader asks for. Experiments (dataset runs) are small and listed up front; their traces are
rendered lazily the same way.

**Time.** The backlog ends at ``end`` (default: when the corpus is built); ``traces`` traces start
``spacing`` seconds apart before it, ``live`` more keep starting after it, in real time. A row is
*visible* once its event has happened plus ``ingest_lag`` (and ``late_delay`` for the late rows): the
row written at an observation's start (no output, no end time) from ``start + lag``, the finished row
from ``end + lag``. An observation marked *duplicate* is returned as both rows once finished, as Langfuse
does until ClickHouse merges them. With ``span_end_visibility`` (v4: OTel SDKs export a span when it ends)
there is no started row: a row is visible from ``end + export_delay``, a duplicate is the finished row twice.

**Shapes.** ``Scenario.trace_duration`` stretches each production trace to a drawn duration (e.g. 1–20
minutes; ``Corpus.max_duration`` follows, so window scans stay correct); ``multi_root_rate`` gives some
production traces a second parentless span (two ``isRootObservation`` rows, :meth:`Corpus.root_records`).

Usage::

    corpus = Corpus(Scenario(seed=7, traces=2000, spacing=1.0))
    header = corpus.production.header(0)
    rendered = corpus.render(header)          # rows, the task, the ideal task
    items = corpus.dataset_items               # dataset items by id (expected outputs, topics)
"""

from __future__ import annotations

import hashlib
import heapq
import json
import random
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from standins.formats import (
    FORMATS,
    HOSTILE_KINDS,
    INJECTION,
    PROJECT_ID,
    RENDERERS,
    RowBuilder,
    hex_id,
    make_hostile,
    meta,
    record_fault,
    started_version,
)
from standins.langfuse_query import iso
from standins.settings import refuse_unknown
from standins.tasks import DEVIATIONS, PRODUCTION_FAULTS, TASKS, Task, deviate, make_task, with_fault

#: No generated trace lasts longer (window scans rely on it).
MAX_TRACE = timedelta(seconds=60)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TENANTS = ("acme", "globex", "initech", "umbrella")


def _with_history(rows: list[dict[str, Any]], history: list[dict[str, Any]]) -> None:
    """Earlier turns put into every generation whose input is chat messages (a list of ``role`` objects,
    alone or as ``messages``), after its system messages, as a chat application sends its history; other
    message shapes (LangChain, Gemini, OTel parts…) are left as they are."""
    for row in rows:
        if row.get("type") != "GENERATION" or not isinstance(row.get("input"), str):
            continue
        try:
            value = json.loads(row["input"])
        except ValueError:
            continue
        messages = value.get("messages") if isinstance(value, dict) else value
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
            continue
        system = 0
        while system < len(messages) and messages[system].get("role") == "system":
            system += 1
        messages[system:system] = history
        row["input"] = json.dumps(value, ensure_ascii=False)


def _ms(moment: datetime) -> datetime:
    """Cut to whole milliseconds, as Langfuse's times are (a trace starts when its root row says)."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def micros(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)


def _fraction(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def experiment_id(project_id: str, dataset_id: str, run_name: str) -> str:
    """The id Langfuse (SDK ≥ 5) gives a dataset run: the first 16 hex of a sha256 of its identity."""
    key = json.dumps(
        ["langfuse-experiment-v1", project_id, dataset_id, run_name], separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DatasetSpec:
    name: str = "agent-bench"
    items: int = 20
    #: Experiments (dataset runs) over the dataset.
    runs: int = 2
    #: Each item run this many times per experiment (pass@k).
    attempts: int = 3
    run_name: str = "nightly"


@dataclass(frozen=True)
class Scenario:
    seed: int = 0
    #: Production traces in the backlog (ending at ``end``).
    traces: int = 200
    #: More production traces after ``end``, arriving in real time.
    live: int = 0
    #: Seconds between consecutive production trace starts.
    spacing: float = 5.0
    #: When the backlog ends (ISO time); None: when the corpus is built.
    end: str | None = None
    #: environment → weight, for production traces.
    environments: dict[str, float] = field(default_factory=lambda: {"production": 1.0})
    formats: tuple[str, ...] = FORMATS
    #: Task kinds (standins.tasks.TASKS); empty: all.
    tasks: tuple[str, ...] = ()
    #: Share of traces whose agent went wrong in one way (changed argument, missing call, ...).
    deviation_rate: float = 0.4
    #: Share of observations Langfuse returns twice (start row and end row, before ClickHouse merges).
    duplicate_rate: float = 0.2
    #: Share of production traces that are malformed or hostile (see formats.HOSTILE_KINDS).
    hostile_rate: float = 0.0
    hostile_kinds: tuple[str, ...] = HOSTILE_KINDS
    huge_bytes: int = 300_000
    #: Share of production roots whose metadata carries ``reference_topics`` (for topic_adherence).
    topics_rate: float = 1.0
    #: Share of production roots whose metadata carries the ideal run's ``expected_answer`` and
    #: ``expected_calls`` (golden references, as teams attach to replayed traffic): read them with
    #: ``[targets.references]`` ``expected = "$.trace.metadata.expected_answer"``, ``reference_tool_calls =
    #: "$.trace.metadata.expected_calls"``. Values over 200 characters need ``expandMetadata`` on v4.
    references_rate: float = 0.0
    datasets: tuple[DatasetSpec, ...] = (DatasetSpec(),)
    #: Seconds between experiment traces within a run.
    item_spacing: float = 2.0
    #: Share of experiment item rows without an ``expectedOutput`` key (a reader joins the dataset item).
    omit_expected_rate: float = 0.0
    #: Seconds after an event before its rows are visible.
    ingest_lag: float = 0.0
    #: Share of non-root observations that arrive late, and how much later (seconds).
    late_rate: float = 0.0
    late_delay: float = 0.0
    #: Up to this many seconds more before each observation's rows are visible, drawn per observation
    #: from its id (uniform): ingestion delays vary, so a child can become visible after its root.
    #: 0 (the default): every row after the same delay.
    ingest_jitter: float = 0.0
    #: (min, max) seconds a production trace lasts, drawn per trace (its rows stretched to fit); None:
    #: as rendered (under a minute). E.g. ``(60, 1200)`` with ``spacing=7.2, traces=1000``: traces of
    #: 1–20 minutes over a 2-hour backlog.
    trace_duration: tuple[float, float] | None = None
    #: Share of production traces with a production fault (standins.tasks.PRODUCTION_FAULTS: a repeated
    #: call, an argument of the wrong type, a failed tool, an answer cut off), drawn from the trace id.
    fault_rate: float = 0.0
    faults: tuple[str, ...] = PRODUCTION_FAULTS
    #: Share of production traces with a second parentless span (same traceId, starting later than the
    #: main root and shorter): two rows with ``isRootObservation: true`` (finding 8).
    multi_root_rate: float = 0.0
    #: A production trace (by index) given ``wide_rows`` more observations (spans spread over its run, each
    #: with ``wide_row_bytes`` of output), made as they are served (issue #22: 100,000 observations).
    wide_trace: int | None = None
    wide_rows: int = 0
    wide_row_bytes: int = 200
    #: A production trace (by index) given one more observation whose output is ``huge_row_bytes`` long,
    #: made when served (issue #22: an agent logging whole files).
    huge_row_trace: int | None = None
    huge_row_bytes: int = 0
    #: Production traces per chat session: consecutive production traces (by index) share a ``sessionId``,
    #: one trace per turn, as the SDK integrations record a chat application (the session id on every
    #: observation of the trace). 0: each trace a session of its own.
    session_turns: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.formats) - set(RENDERERS)
        if unknown:
            raise ValueError(f"unknown formats {sorted(unknown)}; known: {list(RENDERERS)}")
        unknown = set(self.tasks) - set(TASKS)
        if unknown:
            raise ValueError(f"unknown tasks {sorted(unknown)}; known: {list(TASKS)}")
        unknown = set(self.faults) - set(PRODUCTION_FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {list(PRODUCTION_FAULTS)}")
        unknown = set(self.hostile_kinds) - set(HOSTILE_KINDS)
        if unknown:
            raise ValueError(f"unknown hostile kinds {sorted(unknown)}; known: {list(HOSTILE_KINDS)}")
        if self.spacing <= 0 or self.traces < 0 or self.live < 0:
            raise ValueError("spacing must be positive, traces and live not negative")
        if self.trace_duration is not None:
            low, high = self.trace_duration
            if not 0 < low <= high:
                raise ValueError("trace_duration is (min, max) seconds, 0 < min <= max")

    def to_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["datasets"] = [asdict(d) for d in self.datasets]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Scenario:
        refuse_unknown(cls, values, "scenario settings")
        data = dict(values)
        if "datasets" in data:
            data["datasets"] = tuple(DatasetSpec(**d) for d in data["datasets"])
        for key in ("formats", "tasks", "hostile_kinds", "faults"):
            if key in data:
                data[key] = tuple(data[key])
        if data.get("trace_duration") is not None:
            data["trace_duration"] = tuple(data["trace_duration"])
        return cls(**data)


@dataclass(frozen=True, slots=True)
class ExperimentLink:
    experiment_id: str
    dataset_item_id: str
    run: int
    attempt: int


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """What is known of a trace without rendering it."""

    trace_id: str
    source: str
    index: int
    start: datetime
    format: str
    environment: str
    hostile: str | None = None
    experiment: ExperimentLink | None = None


@dataclass(slots=True)
class RowRecord:
    """One observation: its finished row, and when each of its rows becomes visible."""

    row: dict[str, Any]
    start_us: int
    duplicate: bool
    visible_started: datetime
    visible_final: datetime
    #: False on v4 (OTel exports a span when it ends): no "started" row, a duplicate is the finished row twice.
    has_started_row: bool = True
    #: A test's rows of this observation (:meth:`Corpus.add_trace`): served as given, every copy.
    given: list[dict[str, Any]] | None = None

    def started_row(self) -> dict[str, Any]:
        """The row Langfuse holds from the observation's start: no output, no end, older ``updatedAt``."""
        return started_version(self.row)

    def visible_rows(self, now: datetime) -> list[dict[str, Any]]:
        if self.given is not None:
            return list(self.given)
        if now >= self.visible_final:
            if not self.duplicate:
                return [self.row]
            return [self.row, self.started_row() if self.has_started_row else self.row]
        if self.has_started_row and now >= self.visible_started:
            return [self.started_row()]
        return []


@dataclass
class RenderedTrace:
    header: TraceHeader
    #: The run as the agent did it (deviated or not).
    task: Task | None
    #: The dataset item's ideal run (experiment traces only).
    ideal: Task | None
    #: Root first.
    records: list[RowRecord]
    end: datetime

    @property
    def root(self) -> RowRecord:
        return self.records[0]

    def visible_rows(self, now: datetime) -> list[dict[str, Any]]:
        return [row for record in self.records for row in record.visible_rows(now)]


# --- sources -------------------------------------------------------------------------------------------


class ProductionSource:
    """Production traces ``0 … count-1``; trace ``i`` starts at ``base + i·spacing + jitter(i)``."""

    kind = "production"

    def __init__(self, scenario: Scenario, base: datetime) -> None:
        self.scenario = scenario
        self.base = base
        self.count = scenario.traces + scenario.live
        self._spacing = timedelta(seconds=scenario.spacing)
        envs = sorted(scenario.environments.items())
        total = sum(w for _, w in envs)
        self._envs: list[tuple[str, float]] = []
        acc = 0.0
        for name, weight in envs:
            acc += weight / total
            self._envs.append((name, acc))

    def __len__(self) -> int:
        return self.count

    def start_of(self, i: int) -> datetime:
        jitter = _fraction(self.scenario.seed, "jitter", i) * 0.5
        return _ms(self.base + self._spacing * (i + jitter))

    def trace_id(self, i: int) -> str:
        return hex_id(f"{self.scenario.seed}:p:{i}", 16) + f"{i:016x}"

    def index_of(self, trace_id: str) -> int | None:
        if len(trace_id) != 32:
            return None
        try:
            i = int(trace_id[16:], 16)
        except ValueError:
            return None
        return i if 0 <= i < self.count and self.trace_id(i) == trace_id else None

    def indices_starting(self, low: datetime | None, high: datetime | None) -> range:
        """Indices whose start may lie in ``[low, high]`` (a superset by one on each side)."""
        lo = 0 if low is None else max(0, int((low - self.base) / self._spacing) - 1)
        hi = self.count if high is None else min(self.count, int((high - self.base) / self._spacing) + 2)
        return range(lo, max(lo, hi))

    def header(self, i: int) -> TraceHeader:
        s = self.scenario
        fmt = s.formats[int(_fraction(s.seed, "format", i) * len(s.formats))]
        draw = _fraction(s.seed, "env", i)
        environment = next((name for name, edge in self._envs if draw < edge), self._envs[-1][0])
        hostile = None
        if s.hostile_rate and _fraction(s.seed, "hostile", i) < s.hostile_rate:
            hostile = s.hostile_kinds[int(_fraction(s.seed, "hostile-kind", i) * len(s.hostile_kinds))]
        return TraceHeader(self.trace_id(i), self.kind, i, self.start_of(i), fmt, environment, hostile)


class ListSource:
    """Traces listed up front (experiment runs, traces added by a test), sorted by start."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.headers: list[TraceHeader] = []
        self._by_id: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.headers)

    def add(self, header: TraceHeader) -> None:
        """Add a trace (or replace the one with its id)."""
        self.headers = [h for h in self.headers if h.trace_id != header.trace_id]
        self.headers.append(header)
        self.headers.sort(key=lambda h: (h.start, h.trace_id))
        self._by_id = {h.trace_id: n for n, h in enumerate(self.headers)}

    def start_of(self, i: int) -> datetime:
        return self.headers[i].start

    def index_of(self, trace_id: str) -> int | None:
        return self._by_id.get(trace_id)

    def indices_starting(self, low: datetime | None, high: datetime | None) -> range:
        import bisect

        starts = [h.start for h in self.headers]
        lo = 0 if low is None else bisect.bisect_left(starts, low)
        hi = len(starts) if high is None else bisect.bisect_right(starts, high)
        return range(lo, max(lo, hi))

    def header(self, i: int) -> TraceHeader:
        return self.headers[i]


Source = ProductionSource | ListSource


# --- the corpus ----------------------------------------------------------------------------------------


class Corpus:
    """Every trace, dataset, dataset item and experiment of a scenario; rows rendered on demand."""

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        now: datetime | None = None,
        cache_size: int = 4096,
        span_end_visibility: bool = False,
        export_delay: float | None = None,
    ) -> None:
        self.scenario = scenario or Scenario()
        s = self.scenario
        end = datetime.fromisoformat(s.end) if s.end else (now or datetime.now(UTC))
        self.end = end.astimezone(UTC).replace(microsecond=end.microsecond // 1000 * 1000)
        base = _ms(self.end - timedelta(seconds=s.spacing * s.traces))
        self.production = ProductionSource(s, base)
        self.experiments_source = ListSource("experiment")
        self.extra = ListSource("extra")
        self.sources: tuple[Source, ...] = (self.production, self.experiments_source, self.extra)
        self._extra_rows: dict[str, list[dict[str, Any]]] = {}
        self._cache: OrderedDict[str, RenderedTrace] = OrderedDict()
        self._roots: OrderedDict[str, list[RowRecord]] = OrderedDict()
        self._cache_size = cache_size
        self.lag = timedelta(seconds=s.ingest_lag)
        #: v4 (OTel): a row is visible only from its span's end + ``export_lag``; no started rows.
        self.span_end_visibility = span_end_visibility
        self.export_lag = self.lag if export_delay is None else timedelta(seconds=export_delay)
        self.late = timedelta(seconds=s.late_delay)
        #: Datasets by name, dataset items by id, experiments (runs) and experiment item rows (v4 shape).
        self.datasets: dict[str, dict[str, Any]] = {}
        self.dataset_items: dict[str, dict[str, Any]] = {}
        self.experiments: list[dict[str, Any]] = []
        self.experiment_items: list[dict[str, Any]] = []
        self._items_by_trace: dict[str, dict[str, Any]] = {}
        #: A test's data (the ``add_…`` methods): experiment item rows, v3 dataset runs and run items
        #: (Postgres rows on a v3 server), how far a test's trace reaches past its start (all rows, roots).
        self.given_items: list[dict[str, Any]] = []
        self.dataset_runs: list[dict[str, Any]] = []
        self.dataset_run_items: list[dict[str, Any]] = []
        self._given_reach: dict[str, tuple[timedelta, timedelta]] = {}
        self._ideal: dict[str, Task] = {}
        self._build_datasets()

    # --- datasets and experiments ------------------------------------------------------------

    def _build_datasets(self) -> None:
        s = self.scenario
        span = timedelta(seconds=s.spacing * max(s.traces, 1))
        created = iso(self.end - span - timedelta(days=1))
        for spec in s.datasets:
            dataset_id = f"ds-{hex_id(f'{s.seed}:dataset:{spec.name}', 12)}"
            self.datasets[spec.name] = {
                "id": dataset_id,
                "name": spec.name,
                "description": f"{spec.items} agent tasks with expected answers and reference tool calls",
                "metadata": {"generator": "standins"},
                "inputSchema": None,
                "expectedOutputSchema": None,
                "projectId": PROJECT_ID,
                "createdAt": created,
                "updatedAt": created,
            }
            item_ids = []
            for k in range(spec.items):
                r = random.Random(f"{s.seed}:item:{spec.name}:{k}")
                task = make_task(r, s.tasks or None)
                item_id = f"{spec.name}-item-{k:04d}"
                item_ids.append(item_id)
                self._ideal[item_id] = task
                self.dataset_items[item_id] = {
                    "id": item_id,
                    "status": "ACTIVE",
                    "input": {"question": task.question},
                    "expectedOutput": {
                        "answer": task.answer,
                        "goal": task.goal,
                        "tool_calls": task.reference_calls(),
                        "tool_sequence_matters": task.tool_sequence_matters,
                    },
                    "metadata": {"reference_topics": task.topics, "kind": task.kind},
                    "sourceTraceId": None,
                    "sourceObservationId": None,
                    "datasetId": dataset_id,
                    "datasetName": spec.name,
                    "createdAt": created,
                    "updatedAt": created,
                    "mediaReferences": [],
                }
            per_run = spec.items * spec.attempts
            run_span = timedelta(seconds=s.item_spacing * per_run)
            for run in range(spec.runs):
                latest = self.end - run_span - MAX_TRACE
                run_start = min(self.end - span + span * ((run + 1) / (spec.runs + 1)), latest)
                run_start = run_start.replace(microsecond=run_start.microsecond // 1000 * 1000)
                run_name = f"{spec.run_name}-{run} - {iso(run_start)}"
                exp_id = experiment_id(PROJECT_ID, dataset_id, run_name)
                self.experiments.append(
                    {
                        "id": exp_id,
                        "name": run_name,
                        "description": None,
                        "datasetId": dataset_id,
                        "metadata": {"model": f"agent-v{run + 1}", "run": str(run)},
                    }
                )
                n = 0
                for k, item_id in enumerate(item_ids):
                    for attempt in range(spec.attempts):
                        start = _ms(run_start + timedelta(seconds=s.item_spacing * n))
                        n += 1
                        trace_id = hex_id(f"{s.seed}:exp:{spec.name}:{run}:{k}:{attempt}", 32)
                        fmt = s.formats[int(_fraction(s.seed, "exp-format", trace_id) * len(s.formats))]
                        link = ExperimentLink(exp_id, item_id, run, attempt)
                        header = TraceHeader(trace_id, "experiment", 0, start, fmt, "sdk-experiment", None, link)
                        self.experiments_source.add(header)

    def _experiment_item_row(self, rendered: RenderedTrace, experiment: Mapping[str, Any]) -> dict[str, Any]:
        header = rendered.header
        assert header.experiment is not None and rendered.task is not None
        item = self.dataset_items[header.experiment.dataset_item_id]
        root = rendered.root.row
        row = {
            "id": root["id"],
            "traceId": header.trace_id,
            "startTime": root["startTime"],
            "endTime": root["endTime"],
            "level": root["level"],
            "environment": "sdk-experiment",
            "experimentId": experiment["id"],
            "experimentName": experiment["name"],
            "experimentItemId": item["id"],
            "experimentDatasetId": item["datasetId"],
            "experimentItemVersion": item["createdAt"],
            "input": item["input"],
            "output": rendered.task.answer,
            "expectedOutput": item["expectedOutput"],
            "metadata": {},
            "experimentItemMetadata": meta(item["metadata"]),
            "experimentMetadata": dict(experiment.get("metadata") or {}),
            "experimentDescription": experiment.get("description"),
        }
        if _fraction(self.scenario.seed, "omit-expected", item["id"]) < self.scenario.omit_expected_rate:
            del row["expectedOutput"]
        return row

    def experiment_item_rows(self) -> list[dict[str, Any]]:
        """Every experiment item row (v4 ``/experiment-items`` shape), rendered once and kept (small)."""
        if not self.experiment_items and len(self.experiments_source):
            by_id = {e["id"]: e for e in self.experiments}
            for header in self.experiments_source.headers:
                assert header.experiment is not None
                rendered = self.render(header)
                row = self._experiment_item_row(rendered, by_id[header.experiment.experiment_id])
                self.experiment_items.append(row)
                self._items_by_trace[header.trace_id] = row
        return self.experiment_items

    def item_visible_at(self, item_row: Mapping[str, Any]) -> datetime:
        """An experiment item is listed once its trace's root row is visible (finished)."""
        end = item_row.get("endTime") or item_row["startTime"]
        return datetime.fromisoformat(end) + (self.export_lag if self.span_end_visibility else self.lag)

    def visible_experiment_items(self, now: datetime) -> list[dict[str, Any]]:
        """The experiment item rows listed at ``now``: the generated ones whose root is visible, and a
        test's (at once)."""
        rows = [i for i in self.experiment_item_rows() if self.item_visible_at(i) <= now]
        return rows + self.given_items

    # --- traces ------------------------------------------------------------------------------

    def find(self, trace_id: str) -> TraceHeader | None:
        for source in self.sources:
            index = source.index_of(trace_id)
            if index is not None:
                return source.header(index)
        return None

    def headers_starting(self, source: Source, low: datetime | None, high: datetime | None) -> Iterator[TraceHeader]:
        """Headers of ``source`` starting in ``[low, high]``, ascending."""
        for i in source.indices_starting(low, high):
            start = source.start_of(i)
            if (low is None or start >= low) and (high is None or start <= high):
                yield source.header(i)

    def render(self, header: TraceHeader) -> RenderedTrace:
        cached = self._cache.get(header.trace_id)
        if cached is not None:
            self._cache.move_to_end(header.trace_id)
            return cached
        rendered = self._render(header)
        self._cache[header.trace_id] = rendered
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return rendered

    def _task_for(self, header: TraceHeader, r: random.Random) -> tuple[Task, Task | None, Task]:
        """The run as the agent did it, the dataset item's ideal run (experiments), and the run before
        any deviation (production traces' golden references)."""
        s = self.scenario
        if header.experiment is not None:
            ideal = self._ideal[header.experiment.dataset_item_id]
            task = ideal
        else:
            ideal = None
            task = make_task(r, s.tasks or None)
        planned = task
        if r.random() < s.deviation_rate:
            task = deviate(task, r, r.choice(DEVIATIONS))
        fault = self.fault_of(header.trace_id) if header.experiment is None else None
        if fault is not None:
            task = with_fault(task, fault)
        if header.hostile == "injection":
            steps = list(task.steps)
            if steps:
                steps[0] = replace(steps[0], result={"note": INJECTION, "data": steps[0].result})
            task = replace(task, question=f"{task.question} {INJECTION}", steps=steps)
        return task, ideal, planned

    def root_record(self, header: TraceHeader) -> RowRecord:
        """The trace's (main) root observation only: from the cache, else rendered without the other
        payloads."""
        return self.root_records(header)[0]

    def root_records(self, header: TraceHeader) -> list[RowRecord]:
        """Every row with ``isRootObservation`` (the main root first; more with ``multi_root_rate``)."""
        cached = self._cache.get(header.trace_id)
        if cached is not None:
            return [cached.root, *(r for r in cached.records[1:] if r.row.get("isRootObservation"))]
        roots = self._roots.get(header.trace_id)
        if roots is None:
            rendered = self._render(header, lite=True)
            roots = [rendered.root, *(r for r in rendered.records[1:] if r.row.get("isRootObservation"))]
            self._roots[header.trace_id] = roots
            if len(self._roots) > self._cache_size * 2:
                self._roots.popitem(last=False)
        return roots

    def _render(self, header: TraceHeader, *, lite: bool = False) -> RenderedTrace:
        s = self.scenario
        if header.source == "extra":
            rows = self._extra_rows[header.trace_id]
            copies: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                copies.setdefault(row["id"], []).append(row)
            records = [self._given_record(given) for given in copies.values()]
            end = max((datetime.fromisoformat(r["endTime"] or r["startTime"]) for r in rows), default=header.start)
            return RenderedTrace(header, None, None, records, end)
        r = random.Random(f"{s.seed}:trace:{header.trace_id}")
        task, ideal, planned = self._task_for(header, r)
        user = f"u-{r.randint(1, 500)}"
        tags = [task.kind] + (["vip"] if r.random() < 0.1 else [])
        builder = RowBuilder(
            header.trace_id,
            header.start,
            environment=header.environment,
            user_id=user,
            session_id=self.session_of(header),
            tags=tags,
            release="v1.4.2",
            trace_name=task.trace_name,
            lite=lite,
        )
        RENDERERS[header.format](task, builder, r)
        rows = builder.rows
        if header.source == "production" and s.session_turns > 1 and header.index % s.session_turns:
            _with_history(rows, self._history(header))
        root_meta: dict[str, Any] = {"tenant": r.choice(TENANTS), "format": header.format}
        if header.experiment is None and r.random() < s.topics_rate:
            root_meta["reference_topics"] = task.topics
        if header.experiment is None and s.references_rate and self.has_references(header.trace_id):
            # Drawn from the id, not from ``r``: scenarios without references render exactly as before.
            root_meta["expected_answer"] = planned.answer
            root_meta["expected_calls"] = planned.reference_calls()
        rows[0]["metadata"] = {**meta(root_meta), **rows[0]["metadata"]}
        if task.extra.get("fault") in ("tool_error", "cut_off"):
            record_fault(rows, task.extra["fault"])
        if header.source == "production" and self.has_second_root(header.trace_id):
            root_ms = (datetime.fromisoformat(rows[0]["endTime"]) - header.start) / timedelta(milliseconds=1)
            builder.obs(
                "root2", "SPAN", f"{task.trace_name} follow-up", int(root_ms * 0.4), max(1, int(root_ms * 0.3)),
                input={"follow_up": task.question}, output={"status": "done"},
            )  # fmt: skip
            rows = builder.rows
        if header.source == "production" and s.trace_duration is not None:
            rows = self._stretch(rows, header)
        if header.experiment is not None:
            rows = self._experiment_layout(header, builder, rows, task)
        if header.hostile is not None:
            rows = make_hostile(rows, header.hostile, r, huge_bytes=s.huge_bytes)
        records = []
        for row in rows:
            duplicate = _fraction(s.seed, "dup", row["id"]) < s.duplicate_rate
            late = row is not rows[0] and s.late_rate > 0 and _fraction(s.seed, "late", row["id"]) < s.late_rate
            records.append(self._record(row, header, duplicate=duplicate, late=late))
        end = datetime.fromisoformat(rows[0]["endTime"])
        if end - header.start > self.max_duration:
            raise AssertionError(f"trace {header.trace_id} lasts {end - header.start}, over {self.max_duration}")
        return RenderedTrace(header, task, ideal, records, end)

    def lazy_rows(
        self, header: TraceHeader, now: datetime, until_us: int | None = None
    ) -> Iterator[tuple[tuple[int, str, int], dict[str, Any]]]:
        """The rows made only as they are served (``wide_trace``, ``huge_row_trace``), newest first, keyed
        as the server sorts rows, from ``until_us`` (a page's cursor) on; nothing for other traces, nor
        before the trace is visible."""
        s = self.scenario
        wide = header.source == "production" and header.index == s.wide_trace and s.wide_rows > 0
        huge = header.source == "production" and header.index == s.huge_row_trace and s.huge_row_bytes > 0
        if not (wide or huge):
            return
        rendered = self.render(header)
        if not rendered.root.visible_rows(now):
            return
        root = rendered.root.row
        start_us = rendered.root.start_us
        span_us = max(1000, micros(rendered.end) - start_us)

        prefix = hex_id(f"{header.trace_id}:lazy", 8)

        def row(key: str, n: int, at_us: int, output: str) -> tuple[tuple[int, str, int], dict[str, Any]]:
            """Row ``n`` (ids fall as ``n`` rises, so rows of one millisecond come in the server's order)."""
            begin = EPOCH + timedelta(microseconds=at_us)
            made = {
                **root,
                "id": f"{prefix}{0xFFFFFFFF - n:08x}",
                "name": key,
                "type": "SPAN",
                "parentObservationId": root["id"],
                "isRootObservation": False,
                "startTime": iso(begin),
                "endTime": iso(begin + timedelta(milliseconds=1)),
                "input": None,
                "output": json.dumps(output),
                "metadata": {},
            }
            return (-at_us, made["id"], 0), made

        def huge_row() -> Iterator[tuple[tuple[int, str, int], dict[str, Any]]]:
            yield row("read_file", s.wide_rows, start_us + span_us // 2 // 1000 * 1000, "x" * s.huge_row_bytes)

        def wide_rows() -> Iterator[tuple[tuple[int, str, int], dict[str, Any]]]:
            step = span_us / (s.wide_rows + 1)
            filler = "y" * s.wide_row_bytes
            top = s.wide_rows if until_us is None else min(s.wide_rows, int((until_us - start_us) / step) + 1)
            for i in reversed(range(max(0, top))):
                at_us = start_us + int(step * (i + 1)) // 1000 * 1000  # milliseconds, as Langfuse keeps them
                yield row("step", i, at_us, filler)

        yield from heapq.merge(*([huge_row()] if huge else []), *([wide_rows()] if wide else []), key=lambda kr: kr[0])

    def duration_of(self, trace_id: str) -> float | None:
        """Seconds a production trace lasts under ``trace_duration`` (None: as rendered)."""
        bounds = self.scenario.trace_duration
        if bounds is None:
            return None
        low, high = bounds
        return low + (high - low) * _fraction(self.scenario.seed, "duration", trace_id)

    def fault_of(self, trace_id: str) -> str | None:
        """The production fault of a trace, drawn from its id (scenarios without faults render as before)."""
        s = self.scenario
        if not s.fault_rate or not s.faults or _fraction(s.seed, "fault", trace_id) >= s.fault_rate:
            return None
        return s.faults[int(_fraction(s.seed, "fault-kind", trace_id) * len(s.faults))]

    def has_second_root(self, trace_id: str) -> bool:
        rate = self.scenario.multi_root_rate
        return rate > 0 and _fraction(self.scenario.seed, "multi-root", trace_id) < rate

    def _stretch(self, rows: list[dict[str, Any]], header: TraceHeader) -> list[dict[str, Any]]:
        """The rows' times scaled around the trace start so the root lasts ``duration_of`` seconds."""
        seconds = self.duration_of(header.trace_id)
        assert seconds is not None
        natural = (datetime.fromisoformat(rows[0]["endTime"]) - header.start).total_seconds()
        factor = seconds / natural if natural > 0 else 1.0
        start = header.start

        def scale(text: str | None) -> str | None:
            if not text:
                return text
            moment = datetime.fromisoformat(text)
            return iso(start + (moment - start) * factor)

        for row in rows:
            for key in ("startTime", "endTime", "completionStartTime", "createdAt", "updatedAt"):
                if key in row:
                    row[key] = scale(row[key])
            for key in ("latency", "timeToFirstToken"):
                if isinstance(row.get(key), int | float):
                    row[key] = round(row[key] * factor, 3)
        rows[0]["startTime"] = iso(start)
        return rows

    def _experiment_layout(
        self, header: TraceHeader, builder: RowBuilder, rows: list[dict[str, Any]], task: Task
    ) -> list[dict[str, Any]]:
        """The SDK's experiment trace: ``experiment-item-run`` → ``experiment-item-task`` → the agent's rows."""
        assert header.experiment is not None
        item = self.dataset_items[header.experiment.dataset_item_id]
        agent_root = rows[0]
        duration = int((datetime.fromisoformat(agent_root["endTime"]) - header.start) / timedelta(milliseconds=1))
        run = builder.obs(
            "xrun", "SPAN", "experiment-item-run", 0, duration + 30, input=item["input"], output=task.answer
        )
        run["metadata"] = meta(
            {
                "experiment_id": header.experiment.experiment_id,
                "experiment_item_id": item["id"],
                "dataset_id": item["datasetId"],
            }
        )
        task_span = builder.obs(
            "xtask",
            "SPAN",
            "experiment-item-task",
            5,
            duration + 20,
            parent="xrun",
            input=item["input"],
            output=task.answer,
        )
        builder.rows.remove(run)
        builder.rows.remove(task_span)
        agent_root["parentObservationId"] = task_span["id"]
        agent_root["isRootObservation"] = False
        return [run, task_span, *rows]

    def _given_record(self, copies: list[dict[str, Any]]) -> RowRecord:
        """A test's observation, its copies served as given (un-merged duplicates included); on v4 only the
        copies of an ended span (OTel exports a span when it ends: a row without ``endTime`` never exists)."""
        row = copies[0]
        served = [c for c in copies if c.get("endTime")] if self.span_end_visibility else copies
        start = datetime.fromisoformat(row["startTime"])
        return RowRecord(row, micros(start), False, start, start, has_started_row=False, given=served)

    def _record(self, row: dict[str, Any], header: TraceHeader, *, duplicate: bool, late: bool) -> RowRecord:
        start = datetime.fromisoformat(row["startTime"])
        end = datetime.fromisoformat(row["endTime"]) if row.get("endTime") else start
        extra = self.late if late else timedelta(0)
        if self.scenario.ingest_jitter > 0:
            extra += timedelta(seconds=self.scenario.ingest_jitter * _fraction(self.scenario.seed, "jitter", row["id"]))
        if self.span_end_visibility:
            visible = end + self.export_lag + extra
            return RowRecord(row, micros(start), duplicate, visible, visible, has_started_row=False)
        return RowRecord(row, micros(start), duplicate, start + self.lag + extra, end + self.lag + extra)

    # --- explicit data (tests) ---------------------------------------------------------------

    def add_trace(self, rows: list[dict[str, Any]]) -> TraceHeader:
        """A trace given as full v4 rows (root first or marked ``isRootObservation``; no row starts before
        it), visible at once; rows with one id are copies of one observation, all served (as ClickHouse
        does before it merges them). Adding a trace again replaces it (its rows as they are now). On v4 a
        row without ``endTime`` is not served: its span has not ended, so it was not exported yet."""
        if not rows:
            raise ValueError("a trace needs at least one row")
        trace_id = rows[0]["traceId"]
        if any(row["traceId"] != trace_id for row in rows):
            raise ValueError("all rows of a trace share its traceId")
        root = next((r for r in rows if r.get("isRootObservation")), rows[0])
        ordered = [root, *[r for r in rows if r is not root]]
        start = datetime.fromisoformat(root["startTime"])
        starts = [datetime.fromisoformat(r["startTime"]) for r in rows]
        if min(starts) < start:
            raise ValueError(f"trace {trace_id}: a row starts before its root")
        roots = [s for s, r in zip(starts, rows, strict=True) if r.get("isRootObservation")]
        self._given_reach[trace_id] = (max(starts) - start, max(roots, default=start) - start)
        header = TraceHeader(trace_id, "extra", 0, start, "given", root.get("environment") or "default")
        self._extra_rows[trace_id] = ordered
        self._cache.pop(trace_id, None)
        self._roots.pop(trace_id, None)
        self.extra.add(header)
        return header

    def add_rows(self, rows: list[dict[str, Any]]) -> list[TraceHeader]:
        """Rows of any traces, each added to the rows its trace was given before (a new trace if none)."""
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_trace.setdefault(row["traceId"], []).append(row)
        return [self.add_trace([*self._extra_rows.get(t, []), *more]) for t, more in by_trace.items()]

    def add_dataset(self, dataset: Mapping[str, Any]) -> None:
        """A dataset (``GET /v2/datasets/{name}`` shape)."""
        self.datasets[dataset["name"]] = dict(dataset)

    def add_dataset_item(self, item: Mapping[str, Any]) -> None:
        """A dataset item (``GET /dataset-items/{id}`` shape)."""
        self.dataset_items[item["id"]] = dict(item)

    def add_experiment(self, experiment: Mapping[str, Any]) -> None:
        """An experiment (``id``, ``name``, ``datasetId``, ``metadata``, …); listed while it has items."""
        self.experiments.append(dict(experiment))

    def add_experiment_item(self, row: Mapping[str, Any]) -> None:
        """An experiment item row (``GET /experiment-items`` shape), listed at once."""
        self.given_items.append(dict(row))

    def add_dataset_run(self, run: Mapping[str, Any]) -> None:
        """A v3 dataset run (``GET /datasets/{name}/runs`` shape; ``updatedAt`` = ``createdAt`` on real
        servers), listed at once beside the runs made of experiments."""
        self.dataset_runs.append(dict(run))

    def add_dataset_run_item(self, item: Mapping[str, Any]) -> None:
        """A v3 dataset run item (``GET /dataset-run-items`` shape) of a run added with :meth:`add_dataset_run`."""
        self.dataset_run_items.append(dict(item))

    # --- summaries for tests -----------------------------------------------------------------

    def has_references(self, trace_id: str) -> bool:
        """Whether a production root carries ``expected_answer`` / ``expected_calls`` (``references_rate``)."""
        return _fraction(self.scenario.seed, "references", trace_id) < self.scenario.references_rate

    def production_headers(self) -> Iterator[TraceHeader]:
        for i in range(len(self.production)):
            yield self.production.header(i)

    def _history(self, header: TraceHeader) -> list[dict[str, Any]]:
        """The earlier turns of the trace's session as a chat application resends them: each turn's
        question and final answer (``Scenario.session_turns``)."""
        turns = self.scenario.session_turns
        messages: list[dict[str, Any]] = []
        for index in range(header.index - header.index % turns, header.index):
            earlier = self.production.header(index)
            task, _, _ = self._task_for(earlier, random.Random(f"{self.scenario.seed}:trace:{earlier.trace_id}"))
            messages += [
                {"role": "user", "content": task.question},
                {"role": "assistant", "content": task.answer or ""},
            ]
        return messages

    def session_of(self, header: TraceHeader) -> str:
        """The trace's ``sessionId`` (see ``Scenario.session_turns``)."""
        turns = self.scenario.session_turns
        if turns > 0 and header.source == "production":
            return f"chat-{self.scenario.seed}-{header.index // turns:05d}"
        return f"chat-{hex_id(header.trace_id, 6)}"

    def expected_sessions(self, environment: str = "production") -> dict[str, list[str]]:
        """Session id → trace ids (in start order) of the backlog's production traces in ``environment``."""
        sessions: dict[str, list[str]] = {}
        for header in (self.production.header(i) for i in range(self.scenario.traces)):
            if header.environment == environment:
                sessions.setdefault(self.session_of(header), []).append(header.trace_id)
        return sessions

    def expected_scored(self, environment: str = "production") -> list[str]:
        """Trace ids of the backlog's production traces in ``environment`` (the live ones excluded)."""
        return [
            h.trace_id
            for h in (self.production.header(i) for i in range(self.scenario.traces))
            if h.environment == environment
        ]

    @property
    def longest_run(self) -> timedelta | None:
        """No generated trace ends later after its start (``render`` checks it); None once a test gave
        traces of its own, whose spans may last any time."""
        return None if self._given_reach else self.max_duration

    @property
    def max_duration(self) -> timedelta:
        """No trace lasts longer: no row starts later after its trace's start (window scans rely on it)."""
        bounds = self.scenario.trace_duration
        longest = MAX_TRACE if bounds is None else max(MAX_TRACE, timedelta(seconds=bounds[1]) + timedelta(seconds=1))
        given = max((rows for rows, _ in self._given_reach.values()), default=timedelta(0))
        return max(longest, given + timedelta(seconds=1))

    @property
    def root_reach(self) -> timedelta:
        """No root row starts later after its trace's start (roots-only scans rely on it): 0 unless traces
        have a second, later root (``multi_root_rate``, or a test's trace)."""
        if self.scenario.multi_root_rate > 0:
            return self.max_duration
        given = max((roots for _, roots in self._given_reach.values()), default=timedelta(0))
        return given + timedelta(seconds=1) if given else timedelta(0)

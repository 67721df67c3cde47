"""The ``[[targets]]`` schema: what to score, with which metrics and KPI formulas.

Metric options are validated later, against the metric's own ``Options`` model, when the target's
plan is built (trace_scorer.scoring.plan): the registry, not this schema, knows each metric's options.
KPI formula options are validated here, against the formula's own ``Options`` model, found by name
in the formula registry (trace_scorer.kpi.formulas).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, Union, cast

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, SerializeAsAny, TypeAdapter, model_validator

from trace_scorer.config.common import Duration, ScoreName, StrictModel
from trace_scorer.config.references import ReferenceSettings, judge_variable_paths
from trace_scorer.data.patterns import SafePattern
from trace_scorer.kpi.base import FormulaOptions
from trace_scorer.kpi.formulas import FormulaClass, installed_formulas


class MetricEntry(StrictModel):
    """``[[targets.metrics]]``: a registry key, an optional score name, and the metric's options."""

    model_config = ConfigDict(extra="allow")

    metric: str
    name: ScoreName | None = None

    @property
    def score_name(self) -> str:
        return self.name or self.metric

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


#: The keys every ``[[targets.kpis]]`` entry has; the rest are its formula's options.
_KPI_KEYS = frozenset({"name", "formula"})


class KpiEntry(StrictModel):
    """``[[targets.kpis]]``: a score name, a formula (trace_scorer.kpi.formulas) and the formula's options.

    An entry is validated as one of a union, tagged by ``formula``, of one entry model per formula in the
    registry: these two keys followed by the formula's ``Options`` fields. A validated entry is an instance
    of its formula's entry model. Errors name the key: pydantic also puts the formula's name in their
    location (``targets.0.kpis.0.threshold.metric``), which ``config.settings.format_location`` leaves out.
    """

    name: ScoreName
    formula: str

    @model_validator(mode="wrap")
    @classmethod
    def _as_formula_entry(cls, data: Any, handler: ModelWrapValidatorHandler[KpiEntry]) -> KpiEntry:
        if cls is not KpiEntry or isinstance(data, KpiEntry):
            return handler(data)
        return _formula_entries().validate_python(data)

    @property
    def options(self) -> FormulaOptions:
        """The formula's options: this entry without ``name`` and ``formula``."""
        options = installed_formulas()[self.formula].Options
        return options.model_validate(self.model_dump(exclude=set(_KPI_KEYS), exclude_unset=True))


def entry_model(formula: FormulaClass) -> type[KpiEntry]:
    """``name``, ``formula`` (this formula's name only), then the formula's options. Pydantic orders a
    model's fields from its most basic class: ``KpiEntry`` comes after ``Options`` in the bases, so first."""
    namespace = {"__module__": __name__, "__annotations__": {"formula": Literal[formula.key]}}
    return cast("type[KpiEntry]", type(f"{formula.__name__}Entry", (formula.Options, KpiEntry), namespace))


@cache
def _formula_entries() -> TypeAdapter[KpiEntry]:
    """The entry models of the registry's formulas, as a union tagged by ``formula``."""
    # Built at run time from the registry, so written with subscripts a type checker cannot follow.
    union = cast(Any, Union)[tuple(entry_model(formula) for formula in installed_formulas().values())]
    return TypeAdapter(cast(Any, Annotated)[union, Field(discriminator="formula")])


#: ``group_by`` value meaning "every sample read is in one group" (e.g. pass@k over a whole file).
ALL_SAMPLES = "*"


class TraceFilterSettings(StrictModel):
    """``[targets.filter]``: which traces a target reads (empty fields do not filter).

    Several sidecars of one Langfuse project must each filter to their own agent's traces (trace name,
    environment, release tag…), or they would score the same traces.
    """

    #: Any of these environments.
    environments: list[str] = Field(default_factory=list)
    #: None of these (the judge's own tracing environment is always excluded as well).
    exclude_environments: list[str] = Field(default_factory=list)
    trace_name: str | None = None
    #: All of these tags.
    tags: list[str] = Field(default_factory=list)
    user_id: str | None = None
    #: Root metadata keys equal to these values.
    metadata: dict[str, str] = Field(default_factory=dict)


#: The observation types Langfuse records (``type`` of an observation row).
ObservationType = Literal[
    "SPAN", "GENERATION", "EVENT", "AGENT", "TOOL", "CHAIN", "RETRIEVER", "EVALUATOR", "EMBEDDING", "GUARDRAIL"
]


class ObservationFilterSettings(StrictModel):
    """``[targets.observations]`` (scope = "observation"): which observations are each one sample. Empty
    fields do not filter; every field given must match."""

    #: Any of these types.
    types: list[ObservationType] = Field(default_factory=lambda: list[ObservationType](["GENERATION"]))
    #: The observation's name matches this regular expression (searched anywhere; RE2 syntax).
    name_pattern: str | None = None
    #: Any of these levels (DEBUG, DEFAULT, WARNING, ERROR).
    levels: list[Literal["DEBUG", "DEFAULT", "WARNING", "ERROR"]] = Field(default_factory=list)
    #: The observation's metadata keys equal to these values.
    metadata: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _usable_pattern(self) -> ObservationFilterSettings:
        if self.name_pattern is not None:
            try:
                SafePattern(self.name_pattern)
            except ValueError as exc:
                raise ValueError(f"name_pattern: {exc}") from None
        return self


#: The defaults of ``interval`` and ``quiet_period`` for ``source = "dataset_runs"``.
DATASET_RUNS_INTERVAL = 60.0
DATASET_RUNS_QUIET_PERIOD = 300.0


class TargetSettings(StrictModel):
    """``[[targets]]``: one stream of work (production traces or dataset runs) and how to score it."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    source: Literal["traces", "dataset_runs"] = "traces"
    #: How often the worker looks for new work. Default: 15 s for production traces (issue #29: scores
    #: within seconds of a trace's end, ≤ 2 reads per 100 traces at 10 a second; one read a tick when
    #: idle), 60 s for dataset runs.
    interval: Duration = 15.0
    #: Offline: the sample field that groups samples (e.g. "run_id", "metadata.KEY"), or "*" for one group
    #: of all the samples read; group metrics and run-level KPIs are computed per group. The dataset_runs
    #: source always groups by run (see ``run_groups``).
    group_by: str | None = None
    metrics: list[MetricEntry] = Field(default_factory=list)
    #: Each entry is its formula's entry model; SerializeAsAny dumps the formula's options too.
    kpis: list[SerializeAsAny[KpiEntry]] = Field(default_factory=list)
    #: Where expected answers, goals, reference calls and topics are read from (JSON paths).
    references: ReferenceSettings = Field(default_factory=ReferenceSettings)
    filter: TraceFilterSettings = Field(default_factory=TraceFilterSettings)
    #: What one sample is (source = "traces"): a "trace"; a "session" (the traces sharing a sessionId, in
    #: order: the whole conversation); an "observation" matching [targets.observations].
    scope: Literal["trace", "session", "observation"] = "trace"
    #: scope = "session": a session is scored once no trace of it started or ended for this long; it is
    #: scored again (an overwrite, same score ids) when it grows afterwards.
    session_quiet: Duration = 600.0
    #: scope = "session": the longest a session lasts; its traces are read this far before the newest
    #: one listed (an older trace of a longer session is left out of its sample).
    max_session_duration: Duration = 86400.0
    observations: ObservationFilterSettings = Field(default_factory=ObservationFilterSettings)

    # -- when is work ready, and how far back to look ------------------------------------------------
    #: How far back the first tick looks (no watermark yet); dataset runs: which experiments are read.
    lookback: Duration | None = None
    #: The window ends this long before now: Langfuse's reads lag behind ingestion. On v4, where a root is
    #: listed as soon as it is visible, it is how late a row may become visible after its span ended: the
    #: listing of what ended since the last one reaches this far back once every ``lag`` (a sweep).
    lag: Duration = 120.0
    #: A trace counts as finished when its root ended at least this long ago (no "finished" signal
    #: exists; children exported after their root are read if they come within it); a dataset run's
    #: run-level scores are posted once no item arrived for this long. Default: 10 s for production
    #: traces, 300 s for dataset runs.
    quiet_period: Duration = 10.0
    #: A root with no end time this long after its start is scored as it is (with a note).
    unfinished_after: Duration = 3600.0
    #: At most this much time is read in one tick (a backlog is worked off window by window).
    max_window: Duration = 3600.0
    #: At most this many traces in one window (0 = no limit): a busier window ends at the start of the
    #: first trace beyond them, and the next one starts there. Bounds a tick's memory (~10 kB a trace listed).
    max_window_traces: int = Field(default=10_000, ge=0)
    #: The longest a trace runs. Langfuse v4 shows a root only once it ended, so a long trace appears
    #: after its start time was passed: each tick also reads this far behind the watermark again (the
    #: ledger keeps a re-read from scoring twice). A longer trace is missed on v4.
    max_trace_duration: Duration = 3600.0
    #: Score this share of the traces, chosen deterministically by trace id (the same ones every time).
    sample_rate: float = Field(default=1.0, gt=0.0, le=1.0)

    # -- traces that failed (e.g. every judge model down) ---------------------------------------------
    #: First retry after this long; each further try waits twice as long.
    retry_after: Duration = 600.0
    #: Give up after this many tries (logged; the trace keeps the scores that did succeed).
    max_tries: int = Field(default=5, ge=1, le=100)

    # -- dataset runs ---------------------------------------------------------------------------------
    #: Dataset names whose runs (experiments) this target scores (source = "dataset_runs").
    datasets: list[str] = Field(default_factory=list)
    #: Only runs whose name matches this regular expression (searched anywhere in the name; RE2 syntax,
    #: matched in linear time: no back-references or look-around).
    run_name_pattern: str | None = None
    #: Only these runs, by name.
    run_names: list[str] | None = None
    #: Which runs are one group for run-level metrics and KPIs: "each" run alone, or all selected runs
    #: of a "dataset" together (pass@k across runs); group results are posted on every run of the group.
    run_groups: Literal["each", "dataset"] = "each"
    #: Compare each run, once its run-level scores are posted, with this run of the dataset: "previous"
    #: (the newest run started before it), a run name, or "re:PATTERN" (the newest matching run before it);
    #: posts ``delta_<name>`` scores on the run (docs/compare.md).
    compare_to: str | None = None
    #: ``backfill`` (and ``compare`` with this target) exit 3 when a score is significantly worse than
    #: in the baseline run: a CI gate after a benchmark run.
    fail_on_regression: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> TargetSettings:
        if self.source == "dataset_runs":  # a run is scored as a whole: no hurry, and items trickle in
            if "interval" not in self.model_fields_set:
                self.interval = DATASET_RUNS_INTERVAL
            if "quiet_period" not in self.model_fields_set:
                self.quiet_period = DATASET_RUNS_QUIET_PERIOD
        if not self.metrics:
            raise ValueError("a target needs at least one [[targets.metrics]] entry")
        if self.source == "dataset_runs" and not self.datasets:
            raise ValueError("datasets: a dataset_runs target needs the names of the datasets to score")
        if self.source == "traces" and (self.datasets or self.run_names or self.run_name_pattern):
            raise ValueError("datasets, run_names and run_name_pattern apply to source = 'dataset_runs' only")
        if self.scope != "trace" and self.source != "traces":
            raise ValueError(
                f"scope = {self.scope!r} applies to source = 'traces' only (dataset runs are scored per item)"
            )
        if self.run_name_pattern is not None:
            try:
                SafePattern(self.run_name_pattern)
            except ValueError as exc:
                raise ValueError(f"run_name_pattern: {exc}") from None
        self._check_comparison()
        self._judge_variables()
        return self

    def _judge_variables(self) -> None:
        """Extraction keeps the values of the paths the ``llm_judge`` metrics read (Sample.variables)."""
        paths = [p for m in self.metrics if m.metric == "llm_judge" for p in judge_variable_paths(m.options)]
        wanted = list(dict.fromkeys([*self.references.variables, *paths]))
        if wanted != self.references.variables:
            self.references = self.references.model_copy(update={"variables": wanted})

    def _check_comparison(self) -> None:
        """``compare_to``: dataset runs only, a usable pattern, and room for ``delta_`` in every score name."""
        if self.compare_to is None:
            if self.fail_on_regression and self.source == "dataset_runs":
                raise ValueError("fail_on_regression: needs compare_to (the run to compare each run with)")
            return
        if self.source != "dataset_runs":
            raise ValueError("compare_to applies to source = 'dataset_runs' only (offline: compare --baseline)")
        if self.compare_to.startswith("re:"):
            try:
                SafePattern(self.compare_to.removeprefix("re:"))
            except ValueError as exc:
                raise ValueError(f"compare_to: {exc}") from None
        for name in [m.score_name for m in self.metrics] + [k.name for k in self.kpis]:
            if len(name) > 35 - len("delta_"):
                raise ValueError(f"compare_to: score name {name!r} is too long for its delta_{name} score (35 at most)")

    @property
    def effective_lookback(self) -> float:
        """Default: an hour of production traces; a week of dataset runs."""
        if self.lookback is not None:
            return self.lookback
        return 3600.0 if self.source == "traces" else 7 * 86400.0

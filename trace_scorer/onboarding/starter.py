"""``trace-scorer init``: a first, commented settings file.

Without Langfuse credentials it holds the main sections and, commented out, a target with every
registered metric and the sample fields it needs. With credentials (LANGFUSE_PUBLIC_KEY /
LANGFUSE_SECRET_KEY) it first reads recent traces, extracts them as the worker would, counts which
fields they have, and proposes a target whose metrics have their inputs: the deterministic ones on, the
judged ones commented out until a provider is configured. Never over an existing file without ``force``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_scorer.errors import UserError
from trace_scorer.onboarding.catalog import MetricInfo
from trace_scorer.sample import Sample

if TYPE_CHECKING:
    from trace_scorer.config import Settings
    from trace_scorer.config.references import ReferenceSettings
    from trace_scorer.extract.rows import Observation
    from trace_scorer.langfuse import LangfuseClient, TimeWindow
    from trace_scorer.langfuse.types import TraceFilter

#: The sample fields a metric can require, in the order the survey lists them.
FIELDS = ("messages", "response", "tool_calls", "expected", "reference", "reference_tool_calls", "reference_topics")
#: A note extraction leaves when a message is in no format it reads (trace_scorer/extract/extractor.py).
UNKNOWN_FORMAT = "not in a message format we know"


@dataclass
class Survey:
    """What recent traces hold: how many were read, and per field how many had it."""

    traces: int = 0
    hours: float = 0.0
    fields: Counter[str] = field(default_factory=Counter)
    unknown_format: int = 0

    @classmethod
    def of(cls, samples: Sequence[Sample], hours: float) -> Survey:
        survey = cls(traces=len(samples), hours=hours)
        for sample in samples:
            survey.fields.update(name for name in FIELDS if getattr(sample, name) is not None)
            if any(UNKNOWN_FORMAT in note for note in sample.notes):
                survey.unknown_format += 1
        return survey

    def has(self, info: MetricInfo) -> bool:
        """Whether some recent trace has every field ``info`` requires."""
        return all(self.fields[name] for name in info.requires)


def _metric_block(info: MetricInfo, *, active: bool, why: str) -> list[str]:
    """A ``[[targets.metrics]]`` entry, commented out unless ``active``; its required options noted."""
    prefix = "  " if active else "  # "
    inputs = ", ".join(info.requires) or "no sample field"
    lines = [f"{prefix}[[targets.metrics]]", f'{prefix}metric = "{info.key}"    # {why}inputs: {inputs}']
    lines += [f"  # {o.name} = …    # required ({o.type})" for o in info.options if o.required]
    return lines


def _why_off(info: MetricInfo) -> str:
    if "judge" in info.needs:
        return "needs a judge ([[providers]]); "
    if info.needs:
        return "needs an embedding model ([embeddings]); "
    return "needs options; " if any(o.required for o in info.options) else ""


def _survey_lines(survey: Survey) -> list[str]:
    lines = [f"# Proposed from the {survey.traces} newest traces of the last {survey.hours:g} h. Fields they have:"]
    lines += [f"#   {name:22s} {survey.fields[name]} of {survey.traces}" for name in FIELDS]
    if not any(survey.fields[name] for name in FIELDS if name.startswith(("expected", "reference"))):
        lines.append(
            "# No reference (expected answer, expected calls, topics): production traces carry none unless your "
            'agent\n# logs them; [targets.references] says where to read them (docs/formats.md, "References").'
        )
    if survey.unknown_format:
        lines.append(
            f"# {survey.unknown_format} of them hold messages in a format trace-scorer does not read (docs/formats.md)."
        )
    return lines


HEADER = """\
# trace-scorer settings, written by `trace-scorer init`. Every key and its default: the README
# ("Configuration") and the repository's settings.toml. Environment variables override any key as
# TRACE_SCORER_<SECTION>__<KEY>. Secrets never go here: Langfuse keys come from LANGFUSE_PUBLIC_KEY /
# LANGFUSE_SECRET_KEY, judge API keys from the variable each [[providers]] entry names.

[log]
level = "INFO"            # DEBUG | INFO | WARNING | ERROR

[langfuse]
base_url = "{base_url}"

# LLM judges (docs/judges.md): without a provider the judged metrics are skipped with one message.
# [[providers]]
# name = "openrouter"
# base_url = "https://openrouter.ai/api/v1"
# api_key_env = "OPENROUTER_API_KEY"       # the variable holding the key; never the key itself
# chat_models = ["openai/gpt-4o-mini"]

"""

TARGET = [
    "[[targets]]",
    'name = "production"',
    'source = "traces"         # "traces" (production) | "dataset_runs" (experiments)',
    'interval = "1m"           # how often the worker looks for new traces',
]


def render(infos: Sequence[MetricInfo], survey: Survey | None, base_url: str) -> str:
    """The settings file's text: without a survey every per-sample metric commented out; with one, the
    metrics whose inputs some recent trace has (deterministic ones on)."""
    per_sample = [i for i in infos if not i.per_group]
    lines = HEADER.format(base_url=base_url).splitlines()
    if survey is None:
        lines += [
            "# A target: uncomment it and the metrics whose inputs your traces have (`trace-scorer metrics`",
            "# lists them all; `trace-scorer init` with Langfuse credentials proposes them from recent traces).",
            *("# " + line for line in TARGET),
        ]
        for info in per_sample:
            lines += _metric_block(info, active=False, why=_why_off(info))
        return "\n".join(lines) + "\n"
    lines += _survey_lines(survey)
    proposed = [i for i in per_sample if survey.has(i)]
    on = [i for i in proposed if not _why_off(i)]
    if on:
        lines += TARGET
    else:
        lines += ["# No deterministic metric has its inputs in these traces:", *("# " + line for line in TARGET)]
    for info in proposed:
        found = min((survey.fields[name] for name in info.requires), default=survey.traces)
        why = f"in {found} of {survey.traces} traces; " if info in on else _why_off(info)
        lines += _metric_block(info, active=info in on, why=why)
    if missing := [i.key for i in per_sample if not survey.has(i)]:
        lines.append(f"  # Not proposed (their inputs are in none of these traces): {', '.join(missing)}")
    return "\n".join(lines) + "\n"


def write_settings(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``; an existing file is kept unless ``force``."""
    if path.exists() and not force:
        raise UserError(f"{path} exists: not overwritten (--force replaces it)")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


async def recent_samples(settings: Settings, now: datetime, hours: float, limit: int) -> list[Sample]:
    """Up to ``limit`` of the newest traces of the last ``hours``, extracted as the worker extracts them."""
    from trace_scorer.langfuse import LangfuseClient, TimeWindow
    from trace_scorer.langfuse.types import TraceFilter

    async with LangfuseClient(settings.langfuse) as client:
        await client.connect()
        return await read_samples(client, TimeWindow(now - timedelta(hours=hours), now), TraceFilter(), limit)


async def read_samples(
    client: LangfuseClient,
    window: TimeWindow,
    trace_filter: TraceFilter,
    limit: int,
    references: ReferenceSettings | None = None,
    observations: Callable[[Mapping[str, Any]], bool] | None = None,
    *,
    sessions: bool = False,
) -> list[Sample]:
    """Up to ``limit`` of the newest traces in ``window`` matching ``trace_filter``, extracted as the worker
    extracts them (with a target's ``references``). Shared by ``init`` and ``check``. ``observations``: a
    target of scope "observation"'s filter; the samples are then those of the traces' matching
    observations (up to ``limit`` of them). ``sessions``: a target of scope "session"; the samples are
    then up to ``limit`` sessions of the traces listed, each with all of its traces in ``window``."""
    from trace_scorer.extract import extract_sample
    from trace_scorer.extract.observations import observation_samples
    from trace_scorer.langfuse.reads.trace_scan import OversizedTrace

    if sessions:
        return await _read_session_samples(client, window, trace_filter, limit, references)
    roots = []
    async for root in client.reads.list_trace_roots(window, trace_filter):
        roots.append(root)
        if len(roots) >= limit:
            break
    samples = []
    async for trace in client.reads.fetch_traces(roots):
        if isinstance(trace, OversizedTrace) or not trace.observations:
            continue
        records = trace.observations
        if observations is None:
            samples.append(extract_sample(records, references=references, trace_id=trace.trace_id))
        else:
            samples += observation_samples(records, observations, trace_id=trace.trace_id, references=references)
    return samples[:limit]


async def _read_session_samples(
    client: LangfuseClient,
    window: TimeWindow,
    trace_filter: TraceFilter,
    limit: int,
    references: ReferenceSettings | None,
) -> list[Sample]:
    """Up to ``limit`` sessions of the traces listed in ``window`` (traces without a ``sessionId`` passed
    over), each read whole as the session source reads it (one listing by its id, then its traces'
    bodies) and extracted by :func:`extract_session`; a session with an oversized trace is left out."""
    from trace_scorer.extract import extract_session
    from trace_scorer.langfuse.reads.trace_scan import OversizedTrace

    session_ids: list[str] = []
    async for root in client.reads.list_trace_roots(window, trace_filter):
        if root.session_id and root.session_id not in session_ids:
            session_ids.append(root.session_id)
            if len(session_ids) >= limit:
                break
    samples = []
    for session_id in session_ids:
        listing = await client.reads.list_roots(window, replace(trace_filter, session_id=session_id))
        roots = sorted(listing.roots, key=lambda r: (r.start_time, r.trace_id))
        rows: dict[str, list[Observation]] = {}
        oversized = False
        async for trace in client.reads.fetch_traces(roots):
            oversized = oversized or isinstance(trace, OversizedTrace)
            if not isinstance(trace, OversizedTrace):
                rows[trace.trace_id] = trace.observations
        ordered = [row for r in roots for row in rows.get(r.trace_id, [])]
        if ordered and not oversized:
            samples.append(extract_session(ordered, session_id=session_id, references=references))
    return samples

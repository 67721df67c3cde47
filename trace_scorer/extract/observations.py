"""One trace's rows → one Sample per chosen observation (``scope = "observation"``).

An observation's sample is the extraction rooted at it: the observation and its descendants, read by
:func:`extract_sample` as if they were a trace whose root is the observation. So a GENERATION gives its
input messages (the conversation up to it) and its answer, the tool calls it asked for (those of its
output: its input repeats earlier generations' calls), the tools it declared, its finish reason,
latency, tokens and cost; an AGENT or CHAIN gives everything done under it;
a TOOL gives its own execution (arguments, result, error). Where the subtree of a TOOL, AGENT, SPAN...
declares no tools (a TOOL; an AGENT whose generations were not recorded), the tools declared by the
trace's latest generation that started before it are taken: the context a call is validated against.

Never raises on data (as :func:`extract_sample`): rows that are not objects or have no id are left out,
a parent cycle does not loop, and the notes say what was left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract.calls import message_calls
from trace_scorer.extract.extractor import _tool_call, extract_sample
from trace_scorer.extract.facts import read_facts
from trace_scorer.extract.messages import MessageReader
from trace_scorer.extract.model import Notes
from trace_scorer.extract.rows import Observation, RowOrRecord, deduped, find_root, observation_at, raw_row
from trace_scorer.sample import Sample, ToolSpec

#: Observation types that the SDK integrations never give children (the openai wrapper's, LangChain's and
#: OTel GenAI's generations; events; embeddings). Their sample is their own row: it borrows no tools from
#: the generation before it (a generation that declared none offered none), and a v4 server may be asked
#: for their rows alone (``langfuse/reads/observation_filter.py``).
LEAF_TYPES = frozenset({"GENERATION", "EVENT", "EMBEDDING"})
#: A sample's subtree is cut at this many rows (a trace holds at most ``max_rows_per_trace``; this bounds
#: the work per observation when many nested observations match).
MAX_SUBTREE_ROWS = 20_000


#: The fields of an observation's row that describe its trace (v4's ``trace_context``, legacy rows' own).
_TRACE_CONTEXT = ("traceId", "traceName", "tags", "userId", "sessionId", "environment", "release")


def _ident(row: Mapping[str, Any]) -> str | None:
    value = row.get("id")
    return value if isinstance(value, str) and value else None


def _type(observation: Observation) -> str:
    """The row's type as the filter reads it (``str()`` of whatever it holds)."""
    return str(observation.row.get("type", "")).upper()


def observation_samples(
    rows: Iterable[RowOrRecord],
    wanted: Callable[[Mapping[str, Any]], bool],
    *,
    trace_id: str,
    references: ReferenceSettings | None = None,
    trace_row: Mapping[str, Any] | None = None,
) -> list[Sample]:
    """One Sample per row of ``trace_id`` that ``wanted`` accepts, in start-time order (then by id). Each
    sample's ``id`` and ``observation_id`` are the observation's id, ``trace_id`` the trace's.
    ``trace_row``: the trace's root row (as it was listed), read as the samples' ``$.trace``; by default
    the root among ``rows`` (rows a server narrowed to the matching observations may not hold it: then
    ``$.trace`` has only what the observation's row tells of its trace)."""
    notes = Notes()  # the rows' own notes go to each sample's extraction
    given = deduped(rows, notes)
    kept = [
        observation_at(row, seq, notes)
        for seq, row in enumerate(
            r for r in given if raw_row(r).get("traceId") in (trace_id, None) and _ident(raw_row(r))
        )
    ]
    chosen = [o for o in kept if wanted(o.row)]
    if not chosen:
        return []
    if trace_row is None:
        root = find_root(kept)
        trace_row = root.row if root is not None else None
    children: dict[str, list[Observation]] = {}
    for observation in kept:
        parent = observation.row.get("parentObservationId")
        if isinstance(parent, str) and parent and parent != observation.id:
            children.setdefault(parent, []).append(observation)
    chosen.sort(key=_start_key)
    generations = sorted((o for o in kept if _type(o) == "GENERATION"), key=_start_key)
    return [_sample(o, children, generations, trace_id, references, trace_row) for o in chosen]


def _start_key(observation: Observation) -> tuple[bool, str, str]:
    start = observation.start
    return (start is None, start.isoformat() if start else "", observation.id)


def subtree(observation: Observation, children: Mapping[str, list[Observation]]) -> tuple[list[Observation], bool]:
    """The observation and its descendants (each once, whatever cycles the rows hold), and whether the
    subtree was cut at :data:`MAX_SUBTREE_ROWS`."""
    found: list[Observation] = [observation]
    seen = {observation.id}
    stack = list(children.get(observation.id, ()))
    while stack:
        current = stack.pop()
        if current.id in seen:
            continue
        if len(found) >= MAX_SUBTREE_ROWS:
            return found, True
        seen.add(current.id)
        found.append(current)
        stack.extend(children.get(current.id, ()))
    return found, False


def _sample(
    observation: Observation,
    children: Mapping[str, list[Observation]],
    generations: list[Observation],
    trace_id: str,
    references: ReferenceSettings | None,
    trace_row: Mapping[str, Any] | None,
) -> Sample:
    rows, cut = subtree(observation, children)
    # The observation is the root of its extraction (its parent is not among the rows).
    rows[0] = replace(observation, parent_id=None, is_root_flag=True)
    row = observation.row
    if trace_row is None:  # the trace's root not read: $.trace is what the observation's row says of it
        trace_row = {key: row[key] for key in _TRACE_CONTEXT if key in row}
    sample = extract_sample(rows, references=references, trace_id=trace_id, trace_row=trace_row)
    if _type(observation) == "GENERATION" and len(rows) == 1 and sample.tool_calls is not None:
        # A generation's input repeats the calls earlier generations made (the history): the calls it
        # made are those of its output. Its messages keep the whole conversation.
        answered = MessageReader(Notes()).read(observation.output, "output", "")
        sample.tool_calls = [_tool_call(c) for c in message_calls(answered or [])]
    sample.id = observation.id
    sample.observation_id = observation.id
    if cut:
        sample.notes.append(f"the observation's subtree was cut at {MAX_SUBTREE_ROWS:,} rows")
    if sample.tools is None and _type(observation) not in LEAF_TYPES:
        declared = _tools_before(observation, generations)
        if declared is not None:
            sample.tools = declared
    return sample


def _tools_before(observation: Observation, generations: list[Observation]) -> list[ToolSpec] | None:
    """The tools declared by the latest generation that started before ``observation`` (not itself)."""
    start = observation.start
    if start is None:
        return None
    for generation in reversed(generations):
        began = generation.start
        if generation is observation or generation.id == observation.id or began is None or began > start:
            continue
        facts = read_facts([generation], generation)
        if facts.tools is not None:
            return [ToolSpec(name=t.name, parameters=t.parameters, description=t.description) for t in facts.tools]
    return None

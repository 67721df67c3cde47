"""The values of judge-prompt variables (``llm_judge``), read at extraction by the reference paths.

A variable is mapped to a JSON path (config/references.py) into one document per sample:

- ``$`` the dataset/experiment item (``input``, ``expectedOutput``, ``metadata``…), as for references;
- ``$.trace``: the trace (``id``, ``name``, ``input``, ``output``, ``metadata``, ``tags``, ``userId``,
  ``sessionId``, ``environment``, ``release``);
  For an observation's sample (``scope = "observation"``) it is still the trace (its root row, as the
  trace was listed), not the observation; for a session's, its last turn;
- ``$.observation``: the sample's own observation (the root for a trace sample, the last turn's root for
  a session; the observation scored for ``scope = "observation"``);
- ``$.observations.by_name["NAME"]`` / ``$.observations.by_type.TYPE``: the last observation (in trace
  order) of that name or type among the sample's rows (an observation's sample: its subtree), each
  ``{id, name, type, input, output, metadata, level, statusMessage}``;
- ``$.session`` (``scope = "session"``): ``{id, turns: [trace, …]}``, each turn a trace as ``$.trace``
  shows it, in the order they started (``$.session.turns[-1].input``: the last user message's turn).

The metric reads the values from ``Sample.variables`` (path → value): only the paths the settings name
are resolved, so a sample carries what its judges quote and nothing more. ``$.sample.*`` paths are not
resolved here: the metric reads them from the Sample itself (any scope).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from trace_scorer.extract.references import MISSING, resolve
from trace_scorer.extract.rows import Observation

#: Paths under this prefix are read from the Sample by the metric, not at extraction.
SAMPLE_PREFIX = "$.sample"


def observation_view(observation: Observation) -> dict[str, Any]:
    return {
        "id": observation.id,
        "name": observation.name,
        "type": observation.type,
        "input": observation.input,
        "output": observation.output,
        "metadata": observation.metadata,
        "level": observation.level,
        "statusMessage": observation.status_message,
    }


def observations_document(observations: Iterable[Observation]) -> dict[str, Any]:
    """``by_name`` and ``by_type``: the last observation of each name and type, in trace order."""
    by_name: dict[str, Any] = {}
    by_type: dict[str, Any] = {}
    for observation in observations:
        view = observation_view(observation)
        if observation.name:
            by_name[observation.name] = view
        if observation.type:
            by_type[observation.type] = view
    return {"by_name": by_name, "by_type": by_type}


def session_document(
    session_id: str,
    roots: Sequence[Observation],
    trace_view: Callable[[Observation, str | None], dict[str, Any]],
) -> dict[str, Any]:
    """``$.session``: its id and its turns (each trace as ``$.trace`` shows it), oldest first."""
    turns = []
    for root in roots:
        trace_id = root.row.get("traceId")
        turns.append(trace_view(root, trace_id if isinstance(trace_id, str) else None))
    return {"id": session_id, "turns": turns}


def read_variables(document: Mapping[str, Any], paths: Sequence[str]) -> dict[str, Any]:
    """path → value for each path that resolves to something (null is nothing)."""
    found: dict[str, Any] = {}
    for path in paths:
        if path.startswith(SAMPLE_PREFIX):
            continue
        value = resolve(document, path)
        if value is not MISSING and value is not None:
            found[path] = value
    return found

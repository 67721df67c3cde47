"""One trace's observation rows (+ its dataset/experiment item) → one :class:`Sample`.

Never raises on data: whatever could not be read is a short sentence in ``Sample.notes`` (shown by
``score``, logged by the worker), and the fields it would have filled stay absent (``None``), so the
metrics that need them are skipped with a reason rather than scored on a guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.data.rows import json_in_text
from trace_scorer.data.times import parse_time
from trace_scorer.extract.calls import merge_calls, message_calls
from trace_scorer.extract.conversation import Conversation
from trace_scorer.extract.facts import read_facts
from trace_scorer.extract.items import TypedItem, item_document
from trace_scorer.extract.messages import MessageReader
from trace_scorer.extract.model import Call, Msg, Notes, short
from trace_scorer.extract.references import describe_unused, read_references
from trace_scorer.extract.rows import (
    Observation,
    RowOrRecord,
    deduped,
    find_root,
    observation_at,
    raw_row,
    to_observation,
    trace_order,
)
from trace_scorer.extract.tools import output_error, read_tool_observation
from trace_scorer.extract.variables import (
    observation_view,
    observations_document,
    read_variables,
    session_document,
)
from trace_scorer.runtime.plugins import PluginError
from trace_scorer.sample import Sample, ToolCall, content_text

_DEFAULT_REFERENCES = ReferenceSettings()
#: Keys of a root output object that hold the answer (LangChain AgentExecutor: ``output``).
_ANSWER_KEYS = ("output", "answer", "response", "result", "final_answer", "text", "content")


def extract_sample(
    rows: Iterable[RowOrRecord],
    *,
    item: Mapping[str, Any] | TypedItem | None = None,
    references: ReferenceSettings | None = None,
    trace_id: str | None = None,
    trace_row: Mapping[str, Any] | None = None,
) -> Sample:
    """The Sample of one trace: ``rows`` as ``GET /api/public/v2/observations`` returns them (or their
    records, as the Langfuse adapter reads them), ``item`` the experiment/dataset item: typed (the
    worker's), or a JSON object read from a file (``expectedOutput``, ``metadata``, ``experimentItemId``...).
    ``trace_row``: the trace's root row when ``rows`` are not the whole trace but an observation's
    subtree (``scope = "observation"``): the references' and variables' ``$.trace`` is read from it."""
    notes = Notes()
    try:
        return _Extraction(notes, references or _DEFAULT_REFERENCES).run(rows, item, trace_id, trace_row=trace_row)
    except PluginError:  # not the data's fault: a broken plug-in format stops the command (plan.py)
        raise
    except Exception as exc:  # the contract is "never raises on data"; a bug must not stop a run
        notes.add(f"extraction failed ({type(exc).__name__}: {short(str(exc), 100)}); sample left empty")
        fallback = trace_id if isinstance(trace_id, str) else None
        return Sample(id=fallback or "", trace_id=fallback, notes=notes.as_list())


def extract_session(
    rows: Iterable[RowOrRecord], *, session_id: str, references: ReferenceSettings | None = None
) -> Sample:
    """The Sample of one session: the rows of all its traces read as one conversation, the traces in
    the order they started (each trace's root is a top-level observation of the walk), so history a
    turn's generation repeats is read once and tool calls are counted once across turns. The last
    trace's root gives the response, the metadata and the references' ``trace``; tokens and cost are
    the session's totals, latency the sum of its traces' (the user's time between turns left out)."""
    notes = Notes()
    try:
        return _Extraction(notes, references or _DEFAULT_REFERENCES).run(rows, None, None, session_id=session_id)
    except PluginError:
        raise
    except Exception as exc:  # never raises on data, as extract_sample
        notes.add(f"extraction failed ({type(exc).__name__}: {short(str(exc), 100)}); sample left empty")
        return Sample(id=session_id, notes=notes.as_list())


class _Extraction:
    def __init__(self, notes: Notes, references: ReferenceSettings) -> None:
        self.notes = notes
        self.references = references
        self.reader = MessageReader(notes)

    def run(
        self,
        rows: Iterable[Any],
        given: Mapping[str, Any] | TypedItem | None,
        trace_id: str | None,
        *,
        session_id: str | None = None,
        trace_row: Mapping[str, Any] | None = None,
    ) -> Sample:
        notes = self.notes
        typed = given if given is not None and not isinstance(given, Mapping) and isinstance(given, TypedItem) else None
        # A typed item is read as the document its references see; its start time is typed already.
        item = item_document(typed) if typed is not None else given
        if item is not None and not isinstance(item, Mapping):
            notes.add(f"the experiment item is not an object ({short(item)}); ignored")
            item = None
        kept = deduped(rows, notes)
        if session_id is None:
            chosen = trace_id if isinstance(trace_id, str) and trace_id else self._trace_id(kept, item)
            kept = self._only_trace(kept, chosen)
        else:
            chosen = None
        observations = [observation_at(row, seq, notes) for seq, row in enumerate(kept)]
        ordered = trace_order(observations, notes)
        roots = session_roots(ordered) if session_id is not None else [r for r in [find_root(ordered)] if r]
        root = roots[-1] if roots else None
        if session_id is not None and root is not None:
            chosen = root.row.get("traceId") if isinstance(root.row.get("traceId"), str) else None

        conversation, tool_calls, sources = self._walk(ordered)
        if not conversation.messages:
            # Each root's input and output, in turn (a session: every trace's).
            where = {id(o): index for index, o in enumerate(ordered)}
            places = [where[id(r)] for r in roots] + [len(ordered)]
            for index, turn in enumerate(roots):
                before = -0.5 if index == 0 else places[index] - 0.5
                after = places[-1] + 0.5 if index == len(roots) - 1 else places[index + 1] - 0.75
                sources += self._root_conversation(turn, conversation, before, after)
        calls = merge_calls(message_calls(conversation.messages), tool_calls)
        if not ordered:
            notes.add("no observation rows for this trace" + ("; read from the item only" if item else ""))
        elif not sources:
            notes.add("no GENERATION or TOOL observation could be read: the tool calls made are unknown")

        response = self._response(root, item, conversation.messages, bool(ordered))
        trace_root = to_observation(trace_row, 0, Notes()) if trace_row is not None else root
        document = self._reference_document(item, trace_root, chosen)
        found, used = read_references(document, self.references, notes)
        variables: dict[str, Any] = {}
        if self.references.variables:
            document["observation"] = observation_view(root) if root is not None else None
            document["observations"] = observations_document(ordered)
            if session_id is not None:
                document["session"] = session_document(session_id, roots, self._trace_view)
            variables = read_variables(document, self.references.variables)
        if item is not None:
            describe_unused(document.get("expectedOutput"), used, notes)

        start = root.start if root is not None else None
        if start is None and ordered:
            start = min((o.start for o in ordered if o.start is not None), default=None)
        if start is None and item is not None:
            start = typed.start_time if typed is not None else parse_time(item.get("startTime"))
        environment = root.environment if root is not None else None
        if environment is None and item is not None and isinstance(item.get("environment"), str):
            environment = item["environment"]
        ident = chosen or (root.id if root is not None else "")
        facts = read_facts(ordered, root)
        if session_id is not None:
            ident, chosen = session_id, None
            start = roots[0].start if roots else start
            environment = roots[0].environment if roots else environment
            facts.latency = _turns_latency(roots, facts.latency)
        return Sample(
            id=ident,
            # The nested models as their fields: one validation builds them all, a fifth less time
            # than constructing each (the same models, the same fields set).
            messages=[_message_fields(m) for m in conversation.messages] if conversation.messages else None,
            response=response,
            tool_calls=[_tool_call_fields(c) for c in calls] if sources else None,
            item_id=_item_id(item),
            run_id=_first_text(item, "experimentId", "datasetRunId"),
            trace_id=chosen,
            observation_id=root.id if root is not None and session_id is None else None,
            start_time=start,
            environment=environment,
            tools=[{"name": t.name, "parameters": t.parameters, "description": t.description} for t in facts.tools]
            if facts.tools is not None
            else None,
            finish_reason=facts.finish_reason,
            latency=facts.latency,
            total_tokens=facts.total_tokens,
            total_cost=facts.total_cost,
            metadata=dict(root.metadata) if root is not None else {},
            variables=variables,
            notes=notes.as_list(),
            **found,
        )

    def _trace_id(self, rows: list[RowOrRecord], item: Mapping[str, Any] | None) -> str | None:
        counts = Counter(t for row in rows if isinstance(t := raw_row(row).get("traceId"), str) and t)
        if counts:
            return counts.most_common(1)[0][0]
        if item is not None and isinstance(item.get("traceId"), str) and item["traceId"]:
            return str(item["traceId"])
        if rows:
            self.notes.add("the rows have no traceId; read as one trace named by its root observation")
        return None

    def _only_trace(self, rows: list[RowOrRecord], chosen: str | None) -> list[RowOrRecord]:
        if chosen is None:
            return rows
        mine = [row for row in rows if raw_row(row).get("traceId") in (chosen, None)]
        if len(mine) < len(rows):
            self.notes.add(f"{len(rows) - len(mine)} row(s) belong to other traces; left out")
        return mine

    def _walk(self, ordered: list[Observation]) -> tuple[Conversation, list[Call], int]:
        """Generations → the conversation; TOOL observations → calls. Returns how many were read."""
        conversation = Conversation()
        tool_calls: list[Call] = []
        sources = 0
        for index, observation in enumerate(ordered):
            if observation.type == "GENERATION":
                # A generation tells the calls made only when its payload could be read: without
                # the io fields, or in an unknown format, "no calls" would be a guess.
                where = observation.label()  # named once for both sides' notes
                asked = self._messages(observation, "input", index - 0.5, where)
                answered = self._messages(observation, "output", index + 0.5, where)
                if (asked is not None and observation.input is not None) or (
                    answered is not None and observation.output is not None
                ):
                    sources += 1
                conversation.extend((asked or []) + (answered or []))
            elif observation.type == "TOOL":
                call = read_tool_observation(observation, self.notes)
                sources += 1
                if call is not None:
                    call.order = index
                    tool_calls.append(call)
        return conversation, tool_calls, sources

    def _messages(self, observation: Observation, side: str, order: float, where: str) -> list[Msg] | None:
        value = observation.input if side == "input" else observation.output
        found = self.reader.read(value, "input" if side == "input" else "output", where)
        if found is None:
            self.notes.add(f"{where}: {side} is not in a message format we know ({short(value)})")
            return None
        for message in found:
            message.order = order
        return found

    def _root_conversation(self, root: Observation, conversation: Conversation, before: float, after: float) -> int:
        """No generation gave messages: the root's input and output are the conversation. Messages
        when they are messages (a LangGraph state, which also tells the calls made); otherwise the
        input as the user's turn and the output as the answer, as text. Returns 1 when the calls
        made can be known from them (structured messages), else 0."""
        known = 0
        for side, value, order in (("input", root.input, before), ("output", root.output, after)):
            if value is None:
                continue
            found = MessageReader(Notes()).read(value, "input" if side == "input" else "output", "")
            if found and not isinstance(value, str):
                known = 1
            elif not found:
                text = self._answer(value, root.label()) if side == "output" else content_text(value)
                found = [Msg(role="user" if side == "input" else "assistant", content=text)] if text else []
            for message in found:
                message.order = order
            conversation.extend(found)
        return known

    def _response(
        self,
        root: Observation | None,
        item: Mapping[str, Any] | None,
        conversation: list[Msg],
        has_rows: bool,
    ) -> str | None:
        if root is not None and root.output is not None:
            return self._answer(root.output, root.label())
        if item is not None and item.get("output") is not None:
            return self._answer(item["output"], "the item's output")
        last = _last_assistant_text(conversation)
        if last:
            return last
        if not has_rows:
            return None
        if root is not None and "output" not in root.row:
            # Field groups not requested are absent, not null: the answer was not fetched.
            self.notes.add("the rows have no input/output (request the 'io' field group): response unknown")
            return None
        if root is not None and root.ended_known and root.end is None:
            self.notes.add("the trace is not finished (the root has no endTime): no response yet")
            return None
        if root is not None and root.level == "ERROR":
            reason = f": {short(root.status_message, 100)}" if root.status_message else ""
            self.notes.add(f"the root observation ended with an error{reason}; no final answer")
        else:
            self.notes.add("no final answer: the root has no output and no assistant message has text")
        return ""

    def _answer(self, value: Any, where: str) -> str:
        """The final answer in a root/item output: the text; for messages, the last one's text when
        the model spoke last; an answer-like key (``{"output": ...}`` of an AgentExecutor); else the
        value as JSON text."""
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list):
            quiet = MessageReader(Notes())  # the root was read once already; do not note twice
            found = quiet.read(value, "output", where)
            if found is not None:
                # The last message is the answer when the model spoke last; after a tool result or
                # a user turn there is none (an agent stopped mid-way).
                last = found[-1] if found else None
                return last.content if last is not None and last.role == "assistant" else ""
        if isinstance(value, Mapping):
            for key in _ANSWER_KEYS:
                if isinstance(value.get(key), str):
                    return str(value[key])
        return content_text(value)

    def _reference_document(
        self, item: Mapping[str, Any] | None, root: Observation | None, trace_id: str | None
    ) -> dict[str, Any]:
        document: dict[str, Any] = dict(item) if item is not None else {}
        expected = document.get("expectedOutput")
        if isinstance(expected, str):
            document["expectedOutput"] = json_in_text(expected, '{["')
        document["trace"] = self._trace_view(root, trace_id)
        return document

    @staticmethod
    def _trace_view(root: Observation | None, trace_id: str | None) -> dict[str, Any]:
        """``$.trace``: the trace as its root row tells it (one turn of ``$.session.turns`` too)."""
        trace: dict[str, Any] = {"id": trace_id}
        if root is not None:
            row = root.row
            trace.update(
                name=row.get("traceName", root.name),
                metadata=root.metadata,
                input=root.input,
                output=root.output,
                tags=row.get("tags"),
                userId=row.get("userId"),
                sessionId=row.get("sessionId"),
                environment=root.environment,
                release=row.get("release"),
            )
        return trace


def session_roots(ordered: list[Observation]) -> list[Observation]:
    """Each trace's root (:func:`find_root` of its observations), in the order the traces started."""
    by_trace: dict[str, list[Observation]] = {}
    for observation in ordered:
        trace = observation.row.get("traceId")
        by_trace.setdefault(trace if isinstance(trace, str) else "", []).append(observation)
    roots = [root for rows in by_trace.values() if (root := find_root(rows)) is not None]
    return sorted(roots, key=lambda r: (r.start is None, r.start or _EPOCH, r.seq))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _turns_latency(roots: list[Observation], fallback: float | None) -> float | None:
    """The sum of the traces' durations (each root's start to end); ``fallback`` when one is unknown."""
    spans = [(r.end - r.start).total_seconds() for r in roots if r.start is not None and r.end is not None]
    return max(0.0, sum(spans)) if roots and len(spans) == len(roots) else fallback


def _last_assistant_text(messages: list[Msg]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


def _first_text(item: Mapping[str, Any] | None, *keys: str) -> str | None:
    if item is None:
        return None
    for key in keys:
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _item_id(item: Mapping[str, Any] | None) -> str | None:
    """``experimentItemId`` / ``datasetItemId``; a DatasetItem (has ``datasetId``, no traceId) by ``id``.
    An experiment item's own ``id`` is its root span, not the question, so it is never used."""
    found = _first_text(item, "experimentItemId", "datasetItemId")
    if found is None and item is not None and "datasetId" in item and "traceId" not in item:
        found = _first_text(item, "id")
    return found


def _tool_call(call: Call) -> ToolCall:
    return ToolCall(**_tool_call_fields(call))


def _tool_call_fields(call: Call) -> dict[str, Any]:
    """A :class:`ToolCall`'s fields (every one given, as the model is built here)."""
    error = call.error if call.error is not None else output_error(call.result)
    return {"name": call.name, "arguments": call.arguments, "id": call.id, "result": call.result, "error": error}


def _message_fields(message: Msg) -> dict[str, Any]:
    """A :class:`~trace_scorer.sample.Message`'s fields, its calls' too (every one given)."""
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [_tool_call_fields(c) for c in message.calls],
        "tool_call_id": message.tool_call_id,
    }

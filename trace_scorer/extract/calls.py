"""The calls the agent made, each once, in order, with results where known (docs/metrics.md, "The sample").

A call is usually seen twice: as an assistant message's ``tool_calls`` entry and as the TOOL
observation that ran it. They are one call when their ids are equal; where one side has no id, when
name and arguments are equal, pairing them in order (the first unpaired message call of that name and
arguments takes the next such TOOL observation). Both sides having different ids means two calls.
TOOL observations paired with no message call (tools run by code, not chosen by a model) are calls too,
placed by when they ran. A call's result is the TOOL observation's output, else the content of the
tool message answering its id.
"""

from __future__ import annotations

from trace_scorer.extract.model import Call, Msg


def message_calls(conversation: list[Msg]) -> list[Call]:
    """Calls of the assistant messages, each call id once, results from the tool messages."""
    results: dict[str, Msg] = {}
    for message in conversation:
        if message.role == "tool" and message.tool_call_id and message.tool_call_id not in results:
            results[message.tool_call_id] = message
    calls: list[Call] = []
    seen: set[str] = set()
    for message in conversation:
        for call in message.calls:
            if call.id is not None:
                if call.id in seen:
                    continue
                seen.add(call.id)
            call.order = message.order
            answer = results.get(call.id) if call.id is not None else None
            if answer is not None and call.result is None:
                call.result = answer.result
            calls.append(call)
    return calls


def merge_calls(from_messages: list[Call], from_tools: list[Call]) -> list[Call]:
    """One list: message calls paired with the TOOL observations that ran them, the rest by order."""
    by_id: dict[str, Call] = {c.id: c for c in from_messages if c.id is not None}
    paired: set[int] = set()
    extra: list[Call] = []
    for tool_call in from_tools:
        match = by_id.get(tool_call.id) if tool_call.id is not None else None
        if match is not None and id(match) in paired:
            match = None
        if match is None:
            match = _first_unpaired(from_messages, tool_call, paired)
        if match is None:
            extra.append(tool_call)
            continue
        paired.add(id(match))
        if tool_call.result is not None:
            match.result = tool_call.result
        if tool_call.error is not None:
            match.error = tool_call.error
        if match.id is None:
            match.id = tool_call.id
    merged = from_messages + extra
    merged.sort(key=lambda call: call.order)  # stable: equal orders keep message order
    return merged


def _first_unpaired(candidates: list[Call], tool_call: Call, paired: set[int]) -> Call | None:
    key = tool_call.key()
    for candidate in candidates:
        if id(candidate) in paired or candidate.key() != key:
            continue
        if candidate.id is not None and tool_call.id is not None:
            continue  # both have ids and they differ: two different calls
        return candidate
    return None

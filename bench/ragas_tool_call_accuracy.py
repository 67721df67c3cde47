"""The peer of ``bench_offline.py``: ragas' ``ToolCallAccuracy`` over a trace-scorer sample file, as a user runs it.

Run: ``python bench/ragas_tool_call_accuracy.py SAMPLES.jsonl --out VALUES.jsonl [--api ascore|evaluate]``

Reads the JSON-lines sample file (trace-scorer's sample format), turns each sample into a ragas
``MultiTurnSample`` (the conversation with the agent's calls as ``ToolCall``s of its AI messages, and
``reference_tool_calls``: see ``to_ragas``), scores every sample with ``ToolCallAccuracy()`` (its defaults), and writes
``{"id": …, "value": …}`` per sample. Only the standard library and ragas are imported, so it runs under
any interpreter that has ragas (``bench_offline.py --ragas-python``).

``--api ascore`` (default, the fastest way ragas offers): ``await metric.multi_turn_ascore(sample)`` one
sample after another in one event loop. ``--api evaluate``: ``ragas.evaluate(EvaluationDataset(…))``, what
the ragas docs show (an executor, a progress bar, a pandas result).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import warnings
from typing import Any

# ragas sends usage analytics unless told not to; the benchmark machine has no network anyway.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from ragas.dataset_schema import MultiTurnSample
from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from ragas.metrics import ToolCallAccuracy


def _arguments(value: Any) -> dict[str, Any]:
    """Arguments as a dict (the sample format allows a JSON string)."""
    if value is None or value == "":
        return {}
    parsed = json.loads(value) if isinstance(value, str) else value
    if not isinstance(parsed, dict):
        raise ValueError(f"arguments must be an object, got {type(parsed).__name__}")
    return parsed


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _call(call: dict[str, Any]) -> ToolCall:
    return ToolCall(name=call["name"], args=_arguments(call.get("arguments")))


def to_ragas(record: dict[str, Any]) -> MultiTurnSample:
    """A trace-scorer sample → a ragas multi-turn sample (ragas reads the agent's calls from its AI messages).

    A conversation whose assistant messages carry the tool calls is taken as it is; otherwise the sample's
    ``tool_calls`` become one AI message (then one tool message per result) before the final answer.
    """
    messages = record.get("messages") or []
    carried = any(m.get("tool_calls") for m in messages)
    calls = record.get("tool_calls") or []
    conversation: list[HumanMessage | AIMessage | ToolMessage] = []
    for position, message in enumerate(messages):
        role = message["role"]
        content = _text(message.get("content") or "")
        final = position == len(messages) - 1
        if not carried and calls and final and role in ("assistant", "ai"):
            conversation.append(AIMessage(content="", tool_calls=[_call(c) for c in calls]))
            conversation.extend(ToolMessage(content=_text(c.get("result") or "")) for c in calls)
        if role in ("user", "human"):
            conversation.append(HumanMessage(content=content))
        elif role in ("assistant", "ai"):
            tool_calls = [_call(c) for c in message.get("tool_calls") or []]
            conversation.append(AIMessage(content=content, tool_calls=tool_calls or None))
        elif role == "tool":
            conversation.append(ToolMessage(content=content))
    if not carried and calls and not (messages and messages[-1]["role"] in ("assistant", "ai")):
        conversation.append(AIMessage(content="", tool_calls=[_call(c) for c in calls]))
    reference = [_call(c) for c in record.get("reference_tool_calls") or []]
    return MultiTurnSample(user_input=conversation, reference_tool_calls=reference)


async def _score_each(metric: Any, samples: list[MultiTurnSample]) -> list[float]:
    return [await metric.multi_turn_ascore(sample) for sample in samples]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", help="a JSON-lines file in trace-scorer's sample format")
    parser.add_argument("--out", required=True, help="where to write one {id, value} per line")
    parser.add_argument("--api", choices=["ascore", "evaluate"], default="ascore")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # "No tool calls found" and deprecation notices, once per sample

    ids: list[str] = []
    samples: list[MultiTurnSample] = []
    with open(args.samples, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                record = json.loads(line)
                ids.append(record["id"])
                samples.append(to_ragas(record))

    metric = ToolCallAccuracy()
    if args.api == "ascore":
        values = asyncio.run(_score_each(metric, samples))
    else:
        from ragas import EvaluationDataset, evaluate

        result = evaluate(EvaluationDataset(samples=samples), metrics=[metric], show_progress=False)
        values = [float(v) for v in result.to_pandas()[metric.name]]

    with open(args.out, "w", encoding="utf-8") as out:
        for sample_id, value in zip(ids, values, strict=True):
            out.write(json.dumps({"id": sample_id, "value": value}) + "\n")
    print(f"ragas ToolCallAccuracy: {len(values)} samples", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

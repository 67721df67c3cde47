"""Extraction throughput: observation rows per second through ``samples_from_rows``, on one core.

Run: ``PYTHONPATH=. python bench/bench_extract.py [--traces 2000] [--rounds 3]``

Two workloads, both from rows shaped exactly as ``/v2/observations`` returns them (``input``/``output``
as JSON strings, so JSON parsing is part of the cost):
- ``fixtures``: the seven realistic traces of tests/unit/extract/fixtures (OpenAI chat and Responses,
  LangChain, OTel GenAI, Anthropic, TOOL-only, a crashed run; 3-12 rows each, some repeated), copied
  with fresh ids until ``--traces`` traces;
- ``long-agent``: a 20-step tool-calling agent, each generation's input repeating the whole history
  (rows grow with the conversation: the worst realistic case per row).
Prints rows and traces per CPU second of this process (best of ``--rounds``; CPU time, so the figure
holds on a machine shared with other work) and the wall-clock rate. Target: ≥ 20,000 rows/s on one core.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trace_scorer.extract import samples_from_rows

FIXTURES = Path(__file__).parents[1] / "tests" / "unit" / "extract" / "fixtures"
NAMES = [
    "openai_chat",
    "openai_responses",
    "langchain",
    "otel_genai",
    "anthropic",
    "tool_observations",
    "no_answer",
]


def copy_trace(rows: list[dict[str, Any]], copy: int) -> list[dict[str, Any]]:
    """The same trace under new trace and observation ids."""
    suffix = f"-{copy}"
    out = []
    for row in rows:
        new = dict(row)
        new["traceId"] = row["traceId"] + suffix
        new["id"] = row["id"] + suffix
        if row.get("parentObservationId"):
            new["parentObservationId"] = row["parentObservationId"] + suffix
        out.append(new)
    return out


def fixtures_workload(traces: int) -> list[dict[str, Any]]:
    originals = [json.loads((FIXTURES / f"{name}.json").read_text()) for name in NAMES]
    rows: list[dict[str, Any]] = []
    for copy in range(traces):
        rows.extend(copy_trace(originals[copy % len(originals)], copy))
    return rows


def long_agent_trace(trace_id: str, steps: int = 20) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a research assistant. Use the tools. " * 5},
        {"role": "user", "content": "Compare the refund policies of our top 20 suppliers and summarise."},
    ]
    tools = [
        {"type": "function", "function": {"name": "fetch_policy", "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "summarise", "parameters": {"type": "object"}}},
    ]
    rows = [_row(trace_id, "root", None, "AGENT", "research-agent", 0, history[1]["content"], "Summary: ...")]
    for step in range(steps):
        call_id = f"call_{step:03d}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {
                "name": "fetch_policy",
                "arguments": json.dumps({"supplier": f"S-{step}", "section": "refunds"}),
            },
        }
        output = {"role": "assistant", "content": None, "tool_calls": [call]}
        rows.append(
            _row(
                trace_id,
                f"g{step}",
                "root",
                "GENERATION",
                "OpenAI-generation",
                2 * step + 1,
                {"tools": tools, "messages": history},
                output,
            )
        )
        result = f"Supplier S-{step}: refunds within {14 + step} days, store credit after that. " * 3
        rows.append(
            _row(
                trace_id,
                f"t{step}",
                "root",
                "TOOL",
                "fetch_policy",
                2 * step + 2,
                {"supplier": f"S-{step}", "section": "refunds"},
                result,
            )
        )
        history = [*history, output, {"role": "tool", "tool_call_id": call_id, "content": result}]
    final = {"role": "assistant", "content": "Summary: most suppliers refund within 2-5 weeks."}
    rows.append(
        _row(
            trace_id,
            "final",
            "root",
            "GENERATION",
            "OpenAI-generation",
            2 * steps + 1,
            {"tools": tools, "messages": history},
            final,
        )
    )
    return rows  # fmt: skip


def _row(
    trace: str, key: str, parent: str | None, kind: str, name: str, second: int, input: Any, output: Any
) -> dict[str, Any]:
    stamp = f"2026-03-01T10:{second // 60:02d}:{second % 60:02d}.000Z"
    return {
        "id": f"{trace}-{key}",
        "traceId": trace,
        "parentObservationId": f"{trace}-{parent}" if parent else None,
        "type": kind,
        "name": name,
        "startTime": stamp,
        "endTime": stamp,
        "updatedAt": stamp,
        "isRootObservation": parent is None,
        "environment": "production",
        "level": "DEFAULT",
        "input": json.dumps(input),
        "output": json.dumps(output),
        "metadata": {},
    }  # fmt: skip


def long_agent_workload(traces: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for index in range(traces):
        rows.extend(long_agent_trace(f"trace-{index:05d}"))
    return rows


def measure(rows: list[dict[str, Any]], rounds: int) -> tuple[float, float, int]:
    """Best CPU seconds (this process only: fair on a machine shared with other work), best wall
    seconds, and the number of samples."""
    best_cpu = best_wall = float("inf")
    samples = 0
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        samples = sum(1 for _ in samples_from_rows(rows))
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    return best_cpu, best_wall, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces", type=int, default=2000, help="traces per workload (long-agent uses a tenth)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is reported")
    options = parser.parse_args()
    workloads: list[tuple[str, Callable[[int], list[dict[str, Any]]], int]] = [
        ("fixtures", fixtures_workload, options.traces),
        ("long-agent", long_agent_workload, max(1, options.traces // 10)),
    ]
    print(f"extraction throughput, one process (one core); best of {options.rounds} rounds")
    for label, build, count in workloads:
        rows = build(count)
        megabytes = sum(len(r.get("input") or "") + len(r.get("output") or "") for r in rows) / 1e6
        cpu, wall, samples = measure(rows, options.rounds)
        print(
            f"{label:>11}: {len(rows):6d} rows, {samples:5d} traces, {megabytes:5.1f} MB of input/output "
            f"-> {len(rows) / cpu:8,.0f} rows/s per CPU second ({samples / cpu:7,.0f} traces/s); "
            f"wall clock {len(rows) / wall:8,.0f} rows/s"
        )


if __name__ == "__main__":
    main()

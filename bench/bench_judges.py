"""Benchmark: the three judged metrics over many traces against a loopback OpenAI-compatible server.

The server is the shared OpenAI-compatible stand-in (``standins.openai_server``), run as a separate
process so it does not share the client's event loop: it answers every chat-completion request after a
fixed delay with a valid answer for the schema asked, derived from a hash of the request. The client side is
what the pipeline does: each metric's ``score`` awaited per sample, samples run with ``asyncio.gather``
bounded by a semaphore, the judge's concurrency bound per provider. With N LLM calls, a delay d and a
concurrency c, no schedule can finish faster than N·d/c: the figure printed is wall time against that.

Run:  PYTHONPATH=. python bench/bench_judges.py [--traces 500] [--delay 0.2] [--concurrency 16] [--models 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.faults import FaultConfig
from standins.handles import OpenAIHandle, start_openai
from standins.openai_server import OpenAIOptions

# --- the client: the metrics as the pipeline runs them ----------------------------------------------

AGENT_REPLIES = [
    "Searching flights to {city}.",
    "Found {n} flights; the best leaves at 10:00 for ${price}.",
    "Booked. Your confirmation number is {code}.",
]


def make_samples(count: int) -> list[Any]:
    from trace_scorer.sample import Message, Sample, ToolCall

    cities = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Hanoi", "Perth"]
    samples = []
    for i in range(count):
        city = cities[i % len(cities)]
        messages = [
            Message(role="system", content="You are a travel agent. Only discuss travel."),
            Message(role="user", content=f"Book me a flight to {city} for trip #{i}, please."),
            Message(
                role="assistant",
                content=AGENT_REPLIES[0].format(city=city),
                tool_calls=[
                    ToolCall(name="search_flights", arguments={"destination": city, "n": i}, id=f"c{i}")
                ],
            ),
            Message(
                role="tool",
                tool_call_id=f"c{i}",
                content=json.dumps([{"id": f"F{i}{j}", "price": 100 + j} for j in range(20)]),
            ),
            Message(role="assistant", content=AGENT_REPLIES[1].format(n=20, price=100 + i % 50)),
            Message(role="user", content="Great, book it."),
            Message(role="assistant", content=AGENT_REPLIES[2].format(code=f"AF{i:05d}")),
        ]
        samples.append(
            Sample(
                id=f"trace-{i}",
                trace_id=f"trace-{i}",
                messages=messages,
                response=messages[-1].content,
                reference=f"Book a flight to {city}"
                if i % 2 == 0
                else None,  # half the traces: goal inferred
                reference_topics=["flight booking", "travel", "prices", "schedules"],
            )
        )
    return samples


async def run(args: argparse.Namespace, llm: OpenAIHandle) -> int:
    from trace_scorer.config.settings import Settings
    from trace_scorer.judge import build_judge
    from trace_scorer.metrics.agent_goal_accuracy import AgentGoalAccuracy, AgentGoalAccuracyOptions
    from trace_scorer.metrics.aspect_critic import AspectCritic, AspectCriticOptions
    from trace_scorer.metrics.base import Metric, Resources, Score
    from trace_scorer.metrics.topic_adherence import TopicAdherence, TopicAdherenceOptions

    models = [f"judge-{chr(ord('a') + i)}" for i in range(args.models)]
    settings = Settings(
        providers=[
            {
                "name": "loopback",
                "base_url": f"{llm.url}/v1",
                "chat_models": models,
                "max_concurrency": args.concurrency,
                "timeout": "60s",
            }
        ],
        judge={"tracing": False},
    )
    judge = build_judge(settings, environ={})
    assert judge is not None
    resources = Resources(judge=judge)
    metrics: list[Metric[Any]] = [
        AgentGoalAccuracy("goal", AgentGoalAccuracyOptions(), resources),
        TopicAdherence("topics", TopicAdherenceOptions(), resources),
        AspectCritic(
            "helpful",
            AspectCriticOptions(definition="The answer helps the user", strictness=args.strictness),
            resources,
        ),
    ]
    samples = make_samples(args.traces)
    bound = asyncio.Semaphore(args.sample_concurrency)
    outcomes: dict[str, list[Any]] = defaultdict(list)

    async def score(sample: Any) -> None:
        async with bound:
            results = await asyncio.gather(*(m.score(sample, {}) for m in metrics))
        for metric, result in zip(metrics, results, strict=True):
            outcomes[metric.name].append(result)

    started = time.perf_counter()
    await asyncio.gather(*(score(s) for s in samples))
    wall = time.perf_counter() - started
    await judge.aclose()

    calls = sum(u.calls for u in judge.ledger.by_metric().values())
    lower_bound = calls * args.delay / args.concurrency
    ratio = wall / lower_bound
    print(
        f"traces {args.traces}, judge models {args.models}, delay {args.delay * 1000:.0f} ms, "
        f"concurrency {args.concurrency}, aspect strictness {args.strictness}, "
        f"samples in flight ≤ {args.sample_concurrency}"
    )
    print(f"LLM calls            {calls}  ({calls / args.traces:.2f} per trace)")
    print(f"wall time            {wall:.2f} s")
    print(f"lower bound          {lower_bound:.2f} s  (calls × delay ÷ concurrency)")
    print(f"wall / bound         {ratio:.3f}  (target ≤ 1.2: {'met' if ratio <= 1.2 else 'MISSED'})")
    print(f"throughput           {calls / wall:.1f} calls/s (ceiling {args.concurrency / args.delay:.1f})")
    print("per metric           calls/trace  prompt tok/trace  completion tok/trace  scored")
    failures = 0
    for metric in metrics:
        results = outcomes[metric.name]
        scored = [r for r in results if isinstance(r, Score)]
        failures += len(results) - len(scored)
        prompt = statistics.fmean(r.details["tokens"]["prompt"] for r in scored) if scored else 0.0
        completion = statistics.fmean(r.details["tokens"]["completion"] for r in scored) if scored else 0.0
        per_trace = statistics.fmean(r.details["calls"] for r in scored) if scored else 0.0
        counts = f"{len(scored)}/{len(results)}"
        print(f"  {metric.key:<22}{per_trace:>8.2f}  {prompt:>16.0f}  {completion:>20.0f}  {counts}")
    print("(figures from a shared 2-core machine under load from other work; the bound ignores CPU time)")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--traces", type=int, default=500)
    parser.add_argument("--delay", type=float, default=0.2, help="server answer delay, seconds")
    parser.add_argument("--concurrency", type=int, default=16, help="the provider's max_concurrency")
    parser.add_argument("--models", type=int, default=2, help="judge models (all on the one provider)")
    parser.add_argument("--strictness", type=int, default=1, help="aspect_critic votes per model")
    parser.add_argument("--sample-concurrency", type=int, default=64, help="samples scored at once")
    args = parser.parse_args()

    options = OpenAIOptions(profile="openai", faults=FaultConfig(latency=args.delay))
    with start_openai(options, mode="process") as llm:
        status = asyncio.run(run(args, llm))
        served = llm.stats()
    print(f"stand-in served        {served['total_requests']} requests, {len(served['violations'])} violations")
    return status if not served["violations"] else 1


if __name__ == "__main__":
    sys.exit(main())

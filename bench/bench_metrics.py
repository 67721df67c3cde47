"""Throughput and peak memory of the deterministic metrics on synthetic agent samples.

Run: ``python bench/bench_metrics.py`` (options: ``--samples``, ``--repeat``, ``--seed``). Builds
realistic samples (2–6 tool calls with nested arguments and results, a reference that differs the way
agents differ: a changed argument, a missing or extra call, a swapped order, a duplicate; answers of a
few sentences), scores them with each metric alone and with tool_call_accuracy + tool_correctness
together, one ``await metric.score(sample, {})`` per sample inside one event loop, pinned to one CPU,
and prints samples/s (wall clock: best and median of the repeats; CPU time: median, which is what the
targets are checked against, since "on one core" means per second of one core's time) and peak memory.

Targets (issue 2): tool_call_accuracy ≥ 10,000 samples/s; tool_call_accuracy + tool_correctness
≥ 5,000 samples/s, on one core.

``--big-answer MB`` (issue 13; e.g. ``--big-answer 10``) instead scores huge answers with ``rouge`` and
``bleu`` and prints each metric's peak memory (tracemalloc: what Python allocated at once while
scoring, the texts themselves excluded) and time, on three pairs: the answer against a few sentences,
against another answer as big, and two big texts of random Han characters (one token a character: the
worst case). The per-text cap (``max_chars``, default 50,000) is what keeps both bounded;
``--max-chars`` changes it.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trace_scorer.metrics._tokens import DEFAULT_MAX_CHARS
from trace_scorer.metrics.base import Metric, Score, Skipped
from trace_scorer.metrics.bleu import Bleu, BleuOptions
from trace_scorer.metrics.rouge import Rouge, RougeOptions
from trace_scorer.metrics.tool_call_accuracy import ToolCallAccuracy, ToolCallAccuracyOptions
from trace_scorer.metrics.tool_correctness import ToolCorrectness, ToolCorrectnessOptions
from trace_scorer.sample import Message, Sample, ToolCall

CITIES = ["Paris", "Tokyo", "Berlin", "Madrid", "Москва", "New York", "São Paulo", "Nairobi", "Sydney"]
AIRLINES = ["AF", "LH", "BA", "JL", "IB", "SU", "DL"]
NAMES = ["Ivan Petrov", "Ana García", "Li Wei", "John Smith", "Amara Okafor"]


def _flight_search(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "origin": r.choice(CITIES),
        "destination": r.choice(CITIES),
        "date": f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
        "passengers": {"adults": r.randint(1, 3), "children": [{"age": r.randint(2, 12)}] * r.randint(0, 2)},
        "filters": {
            "max_price": r.choice([300, 500, 800]),
            "airlines": r.sample(AIRLINES, 2),
            "nonstop": True,
        },
    }
    flights = [
        {"flight_id": f"{r.choice(AIRLINES)}{r.randint(100, 999)}", "price": r.randint(120, 900), "stops": 0}
        for _ in range(r.randint(1, 3))
    ]
    return args, {"flights": flights, "currency": "EUR"}


def _book_flight(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "flight_id": f"{r.choice(AIRLINES)}{r.randint(100, 999)}",
        "passenger": {"name": r.choice(NAMES), "seat": r.choice(["aisle", "window"])},
        "extras": r.sample(["bag", "meal", "insurance"], r.randint(0, 2)),
    }
    return args, {"booking_reference": f"PNR{r.randint(10000, 99999)}", "status": "confirmed"}


def _weather(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {"city": r.choice(CITIES), "units": r.choice(["celsius", "fahrenheit"]), "days": r.randint(1, 5)}
    return args, {"temperature": r.randint(-10, 35), "condition": r.choice(["sunny", "cloudy", "drizzle"])}


def _hotel(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "city": r.choice(CITIES),
        "check_in": f"2024-05-{r.randint(1, 20):02d}",
        "nights": r.randint(1, 7),
        "guests": {"adults": 2, "rooms": 1},
    }
    return (
        args,
        f"Hotel Lutetia, {r.randint(90, 400)} EUR per night, rating {r.randint(6, 9)}.{r.randint(0, 9)}",
    )


def _order(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {"order_id": f"ORD-{r.randint(1000, 9999)}", "include": ["items", "shipping"]}
    return args, {"status": r.choice(["shipped", "delayed", "delivered"]), "eta": "2024-06-03"}


def _email(r: random.Random) -> tuple[dict[str, Any], Any]:
    args = {"to": "customer@example.com", "subject": "Your booking", "cc": [], "priority": r.randint(1, 3)}
    return args, "ok"


TOOLS: dict[str, Callable[[random.Random], tuple[dict[str, Any], Any]]] = {
    "search_flights": _flight_search,
    "book_flight": _book_flight,
    "get_weather": _weather,
    "search_hotels": _hotel,
    "lookup_order": _order,
    "send_email": _email,
}

SENTENCES = [
    "I found {n} options that match your dates.",
    "The cheapest one costs {p} euros and has no stops.",
    "Your booking is confirmed and the reference is in your email.",
    "The weather will be {c} with about {t} degrees.",
    "Let me know if you want me to change anything.",
    "Ваш заказ уже в пути и прибудет завтра.",
]


def _text(r: random.Random, facts: dict[str, Any]) -> str:
    return " ".join(s.format(**facts) for s in r.sample(SENTENCES, r.randint(3, 5)))


def make_sample(r: random.Random, index: int) -> Sample:
    """One realistic sample: the reference is the truth, the agent's calls differ as agents do."""
    names = r.sample(list(TOOLS), r.randint(2, 5))
    if r.random() < 0.3:
        names.append(names[0])  # the same tool twice (e.g. two searches)
    names = names[:6]
    reference: list[ToolCall] = []
    actual: list[ToolCall] = []
    for name in names:
        args, result = TOOLS[name](r)
        reference.append(ToolCall(name=name, arguments=args))
        actual_args = copy.deepcopy(args)
        roll = r.random()
        if roll < 0.15:  # one argument differs
            key = r.choice(list(actual_args))
            actual_args[key] = "something else"
        elif roll < 0.2:  # an argument is missing
            actual_args.pop(r.choice(list(actual_args)))
        actual.append(
            ToolCall(name=name, arguments=actual_args, id=f"call_{index}_{len(actual)}", result=result)
        )
    roll = r.random()
    if roll < 0.1 and len(actual) > 2:
        actual.pop(r.randrange(len(actual)))  # a call not made
    elif roll < 0.2:
        args, result = TOOLS[r.choice(list(TOOLS))](r)
        actual.append(ToolCall(name=r.choice(list(TOOLS)), arguments=args, result=result))  # an extra call
    elif roll < 0.3 and len(actual) > 1:
        actual[0], actual[1] = actual[1], actual[0]  # order swapped
    facts = {"n": r.randint(1, 5), "p": r.randint(120, 900), "c": "sunny", "t": r.randint(5, 30)}
    expected = _text(r, facts)
    response = _text(r, facts) if r.random() < 0.5 else expected.replace("euros", "EUR")
    return Sample(
        id=f"s{index}",
        messages=[
            Message(role="user", content=f"Plan a trip to {r.choice(CITIES)} for me, please."),
            Message(role="assistant", content=response),
        ],
        response=response,
        tool_calls=actual,
        reference_tool_calls=reference,
        expected=expected,
        tool_sequence_matters=r.random() < 0.5,
    )


async def _run(metrics: list[Metric[Any]], samples: list[Sample]) -> int:
    scored = 0
    for sample in samples:
        for metric in metrics:
            outcome = await metric.score(sample, {})
            if isinstance(outcome, Score | Skipped):
                scored += 1
    return scored


async def _mean_values(metric: Metric[Any], samples: list[Sample]) -> tuple[float, int]:
    """Mean value and number of skips: shows the samples make the metric do real work."""
    values, skipped = [], 0
    for sample in samples:
        outcome = await metric.score(sample, {})
        if isinstance(outcome, Score):
            values.append(outcome.value)
        else:
            skipped += 1
    return statistics.fmean(values), skipped


def throughput(metrics: list[Metric[Any]], samples: list[Sample], repeat: int) -> tuple[float, float, float]:
    """Samples/s over ``repeat`` runs: best and median by wall clock, median by CPU time.

    Each sample is scored by every metric. CPU time (``time.process_time``) is what one core spends;
    on a shared machine the wall clock also counts the time other processes held the core.
    """
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        scored = asyncio.run(_run(metrics, samples))
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        assert scored == len(samples) * len(metrics)
        wall.append(len(samples) / elapsed)
        cpu.append(len(samples) / elapsed_cpu)
    return max(wall), statistics.median(wall), statistics.median(cpu)


def peak_traced(metrics: list[Metric[Any]], samples: list[Sample]) -> int:
    """Peak bytes Python allocated while scoring (tracemalloc; measured in a separate, slower pass)."""
    tracemalloc.start()
    asyncio.run(_run(metrics, samples))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _big_english(r: random.Random, limit: int) -> str:
    parts: list[str] = []
    size = 0
    while size < limit:
        chunk = " ".join(
            s.format(n=r.randint(1, 9), p=r.randint(100, 999), c="cloudy", t=r.randint(1, 30))
            for s in r.sample(SENTENCES, len(SENTENCES))
        )
        parts.append(chunk)
        size += len(chunk.encode()) + 1
    return " ".join(parts)


def big_answer(megabytes: float, seed: int, max_chars: int) -> None:
    """Peak memory and time of rouge and bleu on answers of ``megabytes`` MB (issue 13)."""
    r = random.Random(seed)
    limit = int(megabytes * 2**20)
    response = _big_english(r, limit)
    other = _big_english(r, limit)
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    cjk, cjk_other = ("".join(r.choices(han, k=limit // 3)) for _ in range(2))  # 3 bytes a character
    print(f"answers: {len(response.encode()) / 2**20:.1f} MB ({len(response):,} characters) of English sentences;")
    print(f"         {len(cjk.encode()) / 2**20:.1f} MB ({len(cjk):,} characters) of random Han characters")
    rouge, bleu = Rouge("rouge", RougeOptions(max_chars=max_chars)), Bleu("bleu", BleuOptions(max_chars=max_chars))
    rouge2 = Rouge("rouge2", RougeOptions(variant="rouge2", stemmer="porter", max_chars=max_chars))
    bleu_char = Bleu("bleu", BleuOptions(tokenize="char", max_chars=max_chars))
    short = _text(r, {"n": 3, "p": 420, "c": "sunny", "t": 21})
    cases: list[tuple[str, str, str, list[Metric[Any]]]] = [
        ("vs few-sentence expected", short, response, [rouge, rouge2, bleu]),
        ("vs another big answer", other, response, [rouge, rouge2, bleu]),
        ("CJK vs CJK (bleu: char)", cjk_other, cjk, [rouge, rouge2, bleu_char]),
    ]
    print(f"{'metric':<7} {'case':<25} {'peak (tracemalloc)':>18} {'time':>8}  comment")
    for label, expected, answer, metrics in cases:
        for metric in metrics:
            start = time.perf_counter()
            outcome = asyncio.run(metric.score(Sample(id="big", response=answer, expected=expected), {}))
            elapsed = time.perf_counter() - start  # timed without tracemalloc, which slows allocation down
            tracemalloc.start()
            asyncio.run(metric.score(Sample(id="big", response=answer, expected=expected), {}))
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            comment = outcome.comment if isinstance(outcome, Score) else str(outcome)
            print(f"{metric.name:<7} {label:<25} {peak / 2**20:>14.1f} MiB {elapsed:>7.2f}s  {comment}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--big-answer", type=float, metavar="MB", help="score answers of MB megabytes instead")
    parser.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS, help="the cap, with --big-answer")
    args = parser.parse_args()
    if args.big_answer:
        big_answer(args.big_answer, args.seed, args.max_chars)
        return

    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        print(f"pinned to CPU {core} (machine load average {os.getloadavg()[0]:.2f})")

    r = random.Random(args.seed)
    start = time.perf_counter()
    samples = [make_sample(r, i) for i in range(args.samples)]
    calls = sum(len(s.tool_calls or []) + len(s.reference_tool_calls or []) for s in samples)
    print(f"built {len(samples):,} samples ({calls:,} tool calls) in {time.perf_counter() - start:.1f}s")

    tca = ToolCallAccuracy("tool_call_accuracy", ToolCallAccuracyOptions())
    tca_flex = ToolCallAccuracy(
        "tca_flexible", ToolCallAccuracyOptions(mode="flexible", argument_match_threshold=0.5)
    )
    tc = ToolCorrectness("tool_correctness", ToolCorrectnessOptions())
    rouge = Rouge("rouge", RougeOptions())
    rouge_porter = Rouge("rouge_porter", RougeOptions(stemmer="porter"))
    bleu = Bleu("bleu", BleuOptions())
    runs: list[tuple[str, list[Metric[Any]], float | None]] = [
        ("tool_call_accuracy", [tca], 10_000),
        ("tool_call_accuracy (flexible@0.5)", [tca_flex], None),
        ("tool_correctness", [tc], None),
        ("tool_call_accuracy + tool_correctness", [tca, tc], 5_000),
        ("rouge (rougeL)", [rouge], None),
        ("rouge (rougeL, porter)", [rouge_porter], None),
        ("bleu", [bleu], None),
        ("all four", [tca, tc, rouge, bleu], None),
    ]
    print("\nmean value (skipped) per metric on these samples:")
    for metric in (tca, tca_flex, tc, rouge, bleu):
        mean, skipped = asyncio.run(_mean_values(metric, samples))
        print(f"  {metric.name:<20} {mean:.3f} ({skipped})")

    print(f"\n{'metrics':<40} {'wall best/s':>12} {'wall median/s':>14} {'CPU median/s':>13}  target (CPU)")
    for label, metrics, target in runs:
        best, median, cpu = throughput(metrics, samples, args.repeat)
        verdict = "" if target is None else f"≥ {target:,.0f}: {'met' if cpu >= target else 'MISSED'}"
        print(f"{label:<40} {best:>12,.0f} {median:>14,.0f} {cpu:>13,.0f}  {verdict}")

    peak = peak_traced([tca, tc, rouge, bleu], samples)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\npeak memory: {peak / 2**10:.0f} KiB allocated at once while scoring all four (tracemalloc); "
        f"process peak RSS {rss:.0f} MiB (includes the {len(samples):,} samples held in memory)"
    )
    print(
        "note: on a shared machine other processes take turns on the core, which the wall clock counts "
        f"and CPU time does not (load average now {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()

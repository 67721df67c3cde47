"""Writes baseline.jsonl and candidate.jsonl: two runs of a weather agent over the same 20 questions,
three attempts each (seeded, so the files are reproducible: ``python examples/compare/generate.py``).

The candidate was changed in two ways, and the data says so on purpose:
- it reads the date from the question more reliably: fewer wrong ``date`` arguments → tool_call_accuracy up;
- it answers tersely ("18 °C, light rain.") instead of in a full sentence → rouge against the expected
  answer down;
- which tool it picks did not change: both runs call a web search instead of get_weather on a few
  attempts (different ones) → tool_selection unchanged.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CITIES = [
    "Tokyo",
    "Paris",
    "Oslo",
    "Lima",
    "Cairo",
    "Delhi",
    "Quito",
    "Seoul",
    "Perth",
    "Dakar",
    "Hanoi",
    "Porto",
    "Minsk",
    "Accra",
    "Bogota",
    "Zagreb",
    "Tunis",
    "Riga",
    "Kyiv",
    "Doha",
]
CONDITIONS = ["light rain", "sunshine", "overcast skies", "snow showers", "a thunderstorm", "fog"]
ATTEMPTS = 3


def item(index: int) -> dict[str, object]:
    city = CITIES[index]
    day = 1 + index
    date = f"2026-11-{day:02d}"
    temperature = 5 + (index * 7) % 25
    condition = CONDITIONS[index % len(CONDITIONS)]
    return {"city": city, "date": date, "temperature": temperature, "condition": condition}


def sample(run: str, index: int, attempt: int, rng: random.Random) -> dict[str, object]:
    facts = item(index)
    city, date, temperature, condition = facts["city"], facts["date"], facts["temperature"], facts["condition"]
    question = f"What will the weather be in {city} on {date}?"
    wrong_date_rate = 0.45 if run == "baseline" else 0.08
    called_date = date if rng.random() >= wrong_date_rate else f"2026-12-{1 + index:02d}"
    # Tool selection: the same share of attempts go to a web search in both runs (other items).
    searches = {
        ("baseline", 3, 0),
        ("baseline", 11, 1),
        ("baseline", 16, 2),
        ("candidate", 5, 1),
        ("candidate", 9, 0),
        ("candidate", 14, 2),
    }
    tool = "web_search" if (run, index, attempt) in searches else "get_weather"
    arguments = {"city": city, "date": called_date} if tool == "get_weather" else {"query": question}
    result = {"temperature": temperature, "condition": condition}
    if run == "baseline":
        answer = f"In {city} on {date} it will be {temperature} °C with {condition}."
    else:
        answer = f"{temperature} °C, {condition}."
    trace_id = f"{run}-{index:02d}-{attempt}"
    return {
        "id": trace_id,
        "trace_id": trace_id,
        "item_id": f"weather-{city.lower()}",
        "run_id": run,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": tool, "arguments": arguments}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(result)},
            {"role": "assistant", "content": answer},
        ],
        "response": answer,
        "tool_calls": [{"id": "c1", "name": tool, "arguments": arguments, "result": result}],
        "expected": f"In {city} on {date} it will be {temperature} °C with {condition}.",
        "reference_tool_calls": [{"name": "get_weather", "arguments": {"city": city, "date": date}}],
    }


def main() -> None:
    folder = Path(__file__).parent
    for run, seed in (("baseline", 1), ("candidate", 2)):
        rng = random.Random(seed)
        lines = [
            json.dumps(sample(run, index, attempt, rng), ensure_ascii=False)
            for index in range(len(CITIES))
            for attempt in range(ATTEMPTS)
        ]
        (folder / f"{run}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

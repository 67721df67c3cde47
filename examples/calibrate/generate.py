"""Writes labelled.jsonl: 240 answers of a support agent, as ``trace-scorer score --json`` printed them, with
the labels two people gave them added (seeded, so the file is reproducible:
``python examples/calibrate/generate.py``).

What the data holds, on purpose:
- ``answer_similarity`` (cosine similarity of the answer to the expected one) is what pass@k calls correct
  at the settings' threshold 0.8; the people's ``correct`` label says the right line is lower: correct
  answers mostly score 0.70–0.85, wrong ones 0.55–0.72, so 0.8 rejects most correct answers;
- ``helpful`` is an aspect_critic judged by a panel of three models, three votes each (strictness 3):
  ``judge-large`` agrees with the people on ~92 % of the items, ``judge-mid`` on ~88 % at a fifth of the
  price, ``judge-small`` on ~58 % (barely better than a coin) and its votes often split;
- the two annotators labelled ``helpful`` on every item and disagree on ~6 % of them (then the item's label
  is their mean, 0.5: not a majority, counted as "not helpful").
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ITEMS = 240
#: model → (chance its verdict matches the label, chance a vote flips, USD per call)
MODELS = {
    "judge-large": (0.92, 0.03, 0.0021),
    "judge-mid": (0.88, 0.06, 0.0004),
    "judge-small": (0.58, 0.30, 0.0001),
}


def _votes(rng: random.Random, verdict: int, flip: float) -> list[int]:
    """Three votes whose majority is ``verdict`` (a flipped vote is drawn, then the majority restored)."""
    votes = [verdict if rng.random() >= flip else 1 - verdict for _ in range(3)]
    while (sum(votes) >= 2) != bool(verdict):
        votes[votes.index(1 - verdict)] = verdict
    return votes


def main() -> None:
    rng = random.Random(28)
    lines = []
    for index in range(ITEMS):
        correct = rng.random() < 0.55
        similarity = rng.gauss(0.775, 0.045) if correct else rng.gauss(0.635, 0.045)
        similarity = round(min(max(similarity, 0.0), 1.0), 4)
        helpful = 1 if rng.random() < 0.5 else 0
        second = helpful if rng.random() >= 0.06 else 1 - helpful
        label = helpful if helpful == second else 0  # two people split: not a majority for "helpful"
        models = {}
        for model, (agrees, flip, price) in MODELS.items():
            verdict = label if rng.random() < agrees else 1 - label
            votes = _votes(rng, verdict, flip)
            models[model] = {
                "verdict": "pass" if verdict else "fail",
                "reasoning": "…",
                "value": float(verdict),
                "votes": ["PASS" if v else "FAIL" for v in votes],
                "tokens": {"prompt": 3 * 610, "completion": 3 * 48},
                "calls": 3,
                "cost_usd": round(3 * price, 8),
            }
        value = sum(m["value"] for m in models.values()) / len(models)
        trace = f"support-{index:03d}"
        lines.append(
            {
                "id": trace,
                "trace_id": trace,
                "scores": {"answer_similarity": similarity, "helpful": round(value, 6)},
                "kpis": {},
                "skipped": {},
                "failed": {},
                "notes": [],
                "judges": {
                    "helpful": {"definition": "Does the answer help the customer?", "strictness": 3, "models": models}
                },
                "labels": {"correct": correct, "helpful": [helpful, second]},
            }
        )
    path = Path(__file__).with_name("labelled.jsonl")
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


if __name__ == "__main__":
    main()

"""``trace-scorer calibrate``: the shipped example's figures, and the command's time (a process, as a user
runs it: reading, every figure with its intervals, the threshold, the panels) at n labelled items.

    PYTHONPATH=. python bench/bench_calibrate.py --items 1000 10000

``--alpha`` also times Krippendorff's α with its 500-resample interval in-process (2 annotators + 3 models ×
n items, nominal): the ``krippendorff`` package re-run on each resample, as calibrate did, against the
vectorised resamples of ``calibrate/agreement.py`` (``alpha_of_weights``), with the intervals of both.

The n items are drawn like examples/calibrate/labelled.jsonl (generate.py): a judged score ``helpful`` from
three models with three votes each and two annotators, and ``answer_similarity`` with a binary label.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "calibrate"
MODELS = {"judge-large": (0.92, 0.03, 0.0021), "judge-mid": (0.88, 0.06, 0.0004), "judge-small": (0.58, 0.3, 0.0001)}


def _calibrate(*args: str) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "trace_scorer", "calibrate", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(done.stdout), time.perf_counter() - started


def _figure(found: dict[str, Any], rater: str, name: str) -> str:
    figure = next(r for r in found["raters"] if r["rater"] == rater)["figures"][name]
    return f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}]"


def example() -> None:
    helpful, _ = _calibrate(str(EXAMPLE), "--metric", "helpful")
    print(f"example: helpful against two annotators, {helpful['items']} items")
    for rater in helpful["raters"]:
        cost = rater["cost_per_100"]
        name = rater["rater"]
        money = f"  ${cost:.4f}/100" if cost is not None else ""
        print(f"  {name:<16} κ {_figure(helpful, name, 'kappa')}  F1 {_figure(helpful, name, 'f1')}{money}")
    alpha = helpful["krippendorff_alpha"]
    print(
        f"  Krippendorff's α (2 annotators + 3 models): {alpha['value']:.3f} [{alpha['low']:.3f}, {alpha['high']:.3f}]"
    )
    for model, votes in helpful["strictness"].items():
        print(f"  votes of {model}: α {votes['alpha']['value']:.3f}, unanimous {votes['unanimous']:.1%}")
    panels = helpful["panels"]
    difference = panels["difference"]
    best = panels["best"]
    print(
        f"  best panel: {best['rule']}({', '.join(best['models'])}) κ {best['agreement']:.3f} "
        f"${best['cost_per_100']:.4f}/100; chosen (within {panels['margin']}): "
        f"{', '.join(panels['chosen']['models'])} κ {panels['chosen']['agreement']:.3f} "
        f"${panels['chosen']['cost_per_100']:.4f}/100; gap {difference['value']:.3f} "
        f"[{difference['low']:.3f}, {difference['high']:.3f}]"
    )
    similarity, _ = _calibrate(str(EXAMPLE), "--metric", "answer_similarity", "--label", "correct")
    t = similarity["tuning"]
    print(
        f"example: answer_similarity against 'correct': F1 at the default {t['default']} = {t['default_value']:.3f} "
        f"(cross-validated {t['cv_default_value']:.3f}); tuned threshold {t['threshold']:.4f} "
        f"[{t['interval'][0]:.3f}, {t['interval'][1]:.3f}]: F1 {t['objective_value']:.3f} "
        f"(cross-validated {t['cv_value']:.3f})"
    )


def labelled_file(path: Path, items: int, seed: int = 28) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for index in range(items):
            correct = rng.random() < 0.55
            similarity = min(max(rng.gauss(0.775 if correct else 0.635, 0.045), 0.0), 1.0)
            helpful = rng.randint(0, 1)
            second = helpful if rng.random() >= 0.06 else 1 - helpful
            label = helpful if helpful == second else 0
            models = {}
            for model, (agrees, flip, price) in MODELS.items():
                verdict = label if rng.random() < agrees else 1 - label
                votes = [verdict if rng.random() >= flip else 1 - verdict for _ in range(3)]
                while (sum(votes) >= 2) != bool(verdict):
                    votes[votes.index(1 - verdict)] = verdict
                models[model] = {"value": float(verdict), "votes": votes, "cost_usd": 3 * price}
            line = {
                "id": f"i{index}",
                "scores": {"answer_similarity": similarity, "helpful": sum(m["value"] for m in models.values()) / 3},
                "judges": {"helpful": {"models": models}},
                "labels": {"correct": correct, "helpful": [helpful, second]},
            }
            out.write(json.dumps(line) + "\n")


def alpha_timing(items: int, resamples: int = 500, seed: int = 28) -> None:
    """α's interval: the package on each resample against the vectorised resamples (same draws)."""
    import krippendorff
    import numpy as np

    from trace_scorer.calibrate.agreement import CONFIDENCE, krippendorff_alpha

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, items)
    rows = [np.where(rng.random(items) < agrees, truth, 1 - truth) for agrees in (0.97, 0.94, 0.92, 0.88, 0.58)]
    data = np.asarray(rows, dtype=np.float64)
    started = time.perf_counter()
    draws_rng = np.random.default_rng(0)
    draws = [
        krippendorff.alpha(
            reliability_data=data[:, draws_rng.integers(0, items, items)], level_of_measurement="nominal"
        )
        for _ in range(resamples)
    ]
    looped = time.perf_counter() - started
    low, high = np.percentile(draws, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    started = time.perf_counter()
    found = krippendorff_alpha(data.tolist(), level="nominal", seed=0, n_resamples=resamples)
    vectorised = time.perf_counter() - started
    assert found.low is not None and found.high is not None
    print(
        f"{items:>7} α {found.value:.4f}: package per resample {looped:6.2f} s [{low:.4f}, {high:.4f}]; "
        f"vectorised {vectorised:6.2f} s [{found.low:.4f}, {found.high:.4f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--skip-example", action="store_true")
    parser.add_argument("--alpha", action="store_true", help="also time Krippendorff's α's interval in-process")
    args = parser.parse_args()
    if not args.skip_example:
        example()
    if args.alpha:
        print(f"Krippendorff's α, 5 raters × n items, 500 resamples (in-process, {os.cpu_count()} cores)")
        for items in args.items:
            alpha_timing(items)
    print(f"{'items':>7} {'helpful s':>10} {'answer_similarity s':>20}  (whole command, a process; 2000 resamples)")
    for items in args.items:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "labelled.jsonl"
            labelled_file(path, items)
            found, judged = _calibrate(str(path), "--metric", "helpful")
            assert found["items"] == items
            _, similarity = _calibrate(str(path), "--metric", "answer_similarity", "--label", "correct")
        print(f"{items:>7} {judged:>10.1f} {similarity:>20.1f}")


if __name__ == "__main__":
    main()

"""How long ``trace-scorer compare`` takes to compare two runs: seconds per score for n paired items
(the bootstrap interval and the permutation test, 9999 resamples each), and the HTML report's rendering.

    PYTHONPATH=. python bench/bench_compare.py --items 100 1000 5000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from trace_scorer.compare.analysis import Options, Report, compare_runs
from trace_scorer.compare.runs import RunValues

SCORES = 3


def runs(items: int, seed: int = 0) -> tuple[RunValues, RunValues]:
    rng = np.random.default_rng(seed)
    baseline, candidate = RunValues("baseline"), RunValues("candidate")
    for item in range(items):
        values = rng.uniform(size=SCORES)
        baseline.add(f"i{item}", None, {f"s{k}": float(v) for k, v in enumerate(values)})
        shifted = np.clip(values + rng.normal(0.02, 0.2, size=SCORES), 0, 1)
        candidate.add(f"i{item}", None, {f"s{k}": float(v) for k, v in enumerate(shifted)})
    return baseline, candidate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[100, 1000, 5000])
    args = parser.parse_args()
    print(f"{'items':>7} {'compare s':>10} {'s/score':>8} {'html s':>7}")
    for items in args.items:
        baseline, candidate = runs(items)
        started = time.perf_counter()
        comparison = compare_runs(baseline, candidate, Options())
        compared = time.perf_counter() - started
        from trace_scorer.compare.html import write_html

        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            write_html(Path(folder) / "r.html", Report(source="bench", comparisons=[comparison]))
            html = time.perf_counter() - started
        print(f"{items:>7} {compared:>10.2f} {compared / SCORES:>8.2f} {html:>7.2f}")


if __name__ == "__main__":
    main()

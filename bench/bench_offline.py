"""Offline ``trace-scorer score`` against ragas' ToolCallAccuracy, whole processes, side by side (issue 15).

Run: ``python bench/bench_offline.py`` (options: ``--samples``, ``--repeat``, ``--jobs``, ``--ragas-python``,
``--keep DIR``). Needs ragas (``pip install -e '.[bench]'``, or another interpreter with ragas given by
``--ragas-python``).

1. Writes (seeded) a JSON-lines file of ``--samples`` tool-call samples in trace-scorer's sample format:
   the conversation (the user's request, one assistant message per tool call with its arguments as a
   JSON string, OpenAI-style, the tool's result, the final answer), the agent's ``tool_calls`` (arguments
   as objects, with ids and results), ``reference_tool_calls``, ``expected``. The agent's calls differ from
   the reference the way agents do (bench_metrics.py's generator: a changed or missing argument, a call
   missing, an extra call, a swapped order, a tool called twice).
2. Checks the values: ``trace-scorer score FILE --json`` with a settings file choosing
   ``tool_call_accuracy`` (defaults), and ``bench/ragas_tool_call_accuracy.py FILE`` (ragas'
   ``ToolCallAccuracy()``, defaults), compared sample by sample. The two metrics are not the same formula
   (docs/metrics.md "tool_call_accuracy" against ragas' source): each sample is put in one case by what differs
   between its calls and the reference's, and the cases where both formulas must give the same value
   (identical calls with no tool repeated: 1.0; no call made: 0.0) must agree on every sample, or the
   benchmark exits 1. The other cases are counted with the reason they differ.
3. Times whole processes, start to exit (interpreter start, imports, reading, scoring, writing the
   output to a file), in the same run, interleaved: ``trace-scorer score FILE --json --jobs N`` for each
   ``--jobs`` value and the ragas script, ``--repeat`` times each; prints the median wall time,
   samples/s, the CPU time of each (all its processes), and the ratios. Targets (issue 29): trace-scorer
   ≥ 10× ragas with ``--json`` at one process, ≥ 5× with the table. ``--baseline CHECKOUT`` times another
   checkout's trace-scorer beside (old and new code in one run) and checks its output is byte-identical.

The table output (without ``--json``) is timed too at one job (``--table``): one row per sample, written
as rich writes it (``offline/report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_metrics import make_sample  # noqa: E402

RAGAS_SCRIPT = BENCH / "ragas_tool_call_accuracy.py"

SETTINGS = """\
[log]
level = "WARNING"

[[targets]]
name = "offline"
  [[targets.metrics]]
  metric = "tool_call_accuracy"
"""


# -- the sample file ----------------------------------------------------------------------------------


def sample_record(r: random.Random, index: int, *, conversation: bool = False) -> dict[str, Any]:
    """One sample of the file: bench_metrics.py's sample as the sample format writes it.

    Its messages are the user's request and the final answer; the agent's calls are in ``tool_calls``
    (with ids and results). With ``conversation`` the messages also hold the run itself: one assistant
    message per call (arguments as a JSON string, as OpenAI writes them) and the tool's result.
    """
    sample = make_sample(r, index)
    record = sample.model_dump(mode="json", exclude_defaults=True)
    if conversation:
        messages: list[dict[str, Any]] = record["messages"][:1]
        for position, call in enumerate(record["tool_calls"]):
            call_id = call.setdefault("id", f"call_{index}_x{position}")
            arguments = json.dumps(call.get("arguments", {}), ensure_ascii=False)
            function = {"id": call_id, "name": call["name"], "arguments": arguments}
            messages.append({"role": "assistant", "tool_calls": [function]})
            result = call.get("result")
            content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        record["messages"] = [*messages, *record["messages"][1:]]
    return record


def write_samples(path: Path, count: int, seed: int, *, conversation: bool = False) -> list[dict[str, Any]]:
    r = random.Random(seed)
    records = [sample_record(r, i, conversation=conversation) for i in range(count)]
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return records


# -- the cases where the two formulas differ ----------------------------------------------------------

#: case → (must the values agree?, why they may differ); ragas' formula: ragas/metrics/_tool_call_accuracy.py.
CASES: dict[str, tuple[bool, str]] = {
    "identical, no tool repeated": (True, "both 1.0"),
    "no call made": (True, "both 0.0"),
    "identical, a tool repeated": (
        False,
        "ragas 0.3 credits each reference call against every call of its name (the sum can pass 1.0); "
        "ragas 0.4 pairs calls in order: 1.0 as our one-to-one matching",
    ),
    "arguments differ": (
        False,
        "ragas: each call gets the share of its reference's arguments that are equal as str(); ours "
        "strict mode: a call matches only with all arguments equal",
    ),
    "order differs": (
        False,
        "ragas: 0 unless the names come in the reference's order; ours, order = 'any': order-free",
    ),
    "calls missing or extra": (
        False,
        "ragas 0.4: 0 unless the name sequences are equal; 0.3: shares ÷ reference calls if the reference "
        "is a subsequence, extra calls free; ours: F1 (an extra call costs precision)",
    ),
}


def _canonical(call: dict[str, Any]) -> str:
    return json.dumps([call["name"], call["arguments"]], sort_keys=True)


def case_of(record: dict[str, Any]) -> str:
    actual, reference = record["tool_calls"], record["reference_tool_calls"]
    if not actual:
        return "no call made"
    if [c["name"] for c in actual] == [c["name"] for c in reference]:
        if [_canonical(c) for c in actual] != [_canonical(c) for c in reference]:
            return "arguments differ"
        names = [c["name"] for c in reference]
        return "identical, no tool repeated" if len(set(names)) == len(names) else "identical, a tool repeated"
    if Counter(c["name"] for c in actual) == Counter(c["name"] for c in reference):
        return "order differs"
    return "calls missing or extra"


def compare(records: Sequence[dict[str, Any]], ours: dict[str, float], theirs: dict[str, float]) -> bool:
    """Print agreement per case; False if a case that must agree does not."""
    agree: Counter[str] = Counter()
    values: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    for record in records:
        case, sample_id = case_of(record), record["id"]
        a, b = ours[sample_id], theirs[sample_id]
        values[case].append((a, b))
        agree[case] += abs(a - b) < 1e-6
    print(f"\nper-sample values, trace-scorer vs ragas ({len(records):,} samples):")
    print(f"  {'case':<28} {'samples':>8} {'equal':>7} {'mean ours':>10} {'ragas':>6}  why")
    ok = True
    for case, (must_agree, why) in CASES.items():
        pairs = values[case]
        if not pairs:
            continue
        mark = ""
        if must_agree and agree[case] != len(pairs):
            ok, mark = False, "  <- MUST AGREE"
        mean_ours = statistics.fmean(a for a, _ in pairs)
        mean_theirs = statistics.fmean(b for _, b in pairs)
        print(f"  {case:<28} {len(pairs):>8,} {agree[case]:>7,} {mean_ours:>10.3f} {mean_theirs:>6.3f}  {why}{mark}")
    above = sum(1 for v in theirs.values() if v > 1.0)
    if above:
        print(f"  ragas gave {above:,} values above 1.0")
    return ok


# -- running the processes ----------------------------------------------------------------------------


@dataclass
class Run:
    wall: float
    cpu: float


def timed(command: list[str], stdout: Path, env: dict[str, str], pythonpath: Path | None = None) -> Run:
    """Wall time and CPU time (user + system of the process and its children) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if pythonpath is not None:
        env = {**env, "PYTHONPATH": str(pythonpath)}
    with stdout.open("w") as out:
        # cwd: the output's folder, never a checkout (python -m puts the cwd first on sys.path)
        completed = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, env=env, check=False, cwd=stdout.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {completed.returncode}:\n{completed.stderr.decode()[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall, cpu)


def trace_scorer_command(samples: Path, settings: Path, jobs: int, *, table: bool = False) -> list[str]:
    command = [sys.executable, "-m", "trace_scorer", "score", str(samples), "--config", str(settings)]
    return [*command, "--jobs", str(jobs)] + ([] if table else ["--json"])


def ragas_command(python: str, samples: Path, out: Path, api: str) -> list[str]:
    return [python, str(RAGAS_SCRIPT), str(samples), "--out", str(out), "--api", api]


def read_ours(path: Path) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        if "id" in result:
            values[result["id"]] = result["scores"]["tool_call_accuracy"]
    return values


def read_theirs(path: Path) -> dict[str, float]:
    return {r["id"]: r["value"] for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (medians are printed)")
    parser.add_argument("--jobs", default="1,2", help="--jobs values for trace-scorer, comma-separated")
    parser.add_argument("--table", action="store_true", help="also time the table output at one job")
    parser.add_argument(
        "--conversation", action="store_true", help="samples carry the run in their messages too (a larger file)"
    )
    parser.add_argument("--ragas-python", default=sys.executable, help="an interpreter that has ragas")
    parser.add_argument("--ragas-api", choices=["ascore", "evaluate"], default="ascore")
    parser.add_argument("--keep", type=Path, help="write the files here (default: a temporary folder, removed)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="also time the trace-scorer of another checkout (e.g. a git worktree of main), same interpreter",
    )
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]

    workdir = Path(tempfile.mkdtemp(prefix="bench-offline-")) if args.keep is None else args.keep
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent), "RAGAS_DO_NOT_TRACK": "true"}
    try:
        samples, settings = workdir / "samples.jsonl", workdir / "settings.toml"
        start = time.perf_counter()
        records = write_samples(samples, args.samples, args.seed, conversation=args.conversation)
        settings.write_text(SETTINGS, encoding="utf-8")
        size = samples.stat().st_size / 2**20
        print(f"wrote {len(records):,} samples ({size:.1f} MB) in {time.perf_counter() - start:.1f}s: {samples}")
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
        version = [args.ragas_python, "-c", "import ragas; print(ragas.__version__)"]
        ragas_version = subprocess.run(version, capture_output=True, text=True, env=env, check=True).stdout.strip()
        print(f"ragas {ragas_version} ({args.ragas_python}, --api {args.ragas_api})")

        ours_out, theirs_out = workdir / "trace-scorer.jsonl", workdir / "ragas.jsonl"
        timed(trace_scorer_command(samples, settings, jobs[0]), ours_out, env)
        timed(ragas_command(args.ragas_python, samples, theirs_out, args.ragas_api), workdir / "ragas.stdout", env)
        agreed = compare(records, read_ours(ours_out), read_theirs(theirs_out))
        for j in jobs[1:]:
            other = workdir / f"trace-scorer-jobs{j}.jsonl"
            timed(trace_scorer_command(samples, settings, j), other, env)
            if other.read_bytes() != ours_out.read_bytes():
                print(f"--jobs {j} wrote other lines than --jobs {jobs[0]}")
                agreed = False

        commands: dict[str, list[str]] = {
            f"trace-scorer --json --jobs {j}": trace_scorer_command(samples, settings, j) for j in jobs
        }
        if args.table:
            commands["trace-scorer (table) --jobs 1"] = trace_scorer_command(samples, settings, 1, table=True)
        paths: dict[str, Path | None] = dict.fromkeys(commands)
        if args.baseline is not None:  # the same commands, that checkout's code: old and new in one run
            for label in list(commands):
                paths[f"baseline {label.removeprefix('trace-scorer ')}"] = args.baseline.resolve()
                commands[f"baseline {label.removeprefix('trace-scorer ')}"] = commands[label]
            baseline_out = workdir / "baseline.out"
            for command, name in ((commands[next(iter(commands))], "json"),) + (
                ((trace_scorer_command(samples, settings, 1, table=True), "table"),) if args.table else ()
            ):
                timed(command, baseline_out, env, args.baseline.resolve())
                timed(command, workdir / "current.out", env)
                same = baseline_out.read_bytes() == (workdir / "current.out").read_bytes()
                print(f"output ({name}) byte-identical to the baseline's: {same}")
                agreed = agreed and same
        commands["ragas ToolCallAccuracy"] = ragas_command(args.ragas_python, samples, theirs_out, args.ragas_api)
        runs: dict[str, list[Run]] = {label: [] for label in commands}
        for _ in range(args.repeat):
            for label, command in commands.items():
                runs[label].append(timed(command, workdir / "timed.out", env, paths.get(label)))

        ragas_wall = statistics.median(r.wall for r in runs["ragas ToolCallAccuracy"])
        ragas_cpu = statistics.median(r.cpu for r in runs["ragas ToolCallAccuracy"])
        print(f"\nwhole processes, median of {args.repeat} (load average now {os.getloadavg()[0]:.2f}):")
        print(f"  {'command':<40} {'wall s':>7} {'samples/s':>10} {'× ragas':>8} {'CPU s':>7} {'× ragas CPU':>12}")
        for label, measured in runs.items():
            wall = statistics.median(r.wall for r in measured)
            cpu = statistics.median(r.cpu for r in measured)
            rate = len(records) / wall
            ratios = f"{ragas_wall / wall:>8.2f} {cpu:>7.2f} {ragas_cpu / cpu:>12.2f}"
            print(f"  {label:<40} {wall:>7.2f} {rate:>10,.0f} {ratios}")
        print("  (CPU s: all the command's processes; on a shared machine wall time also counts waiting for a core)")
        if len(jobs) > 1:
            base = statistics.median(r.wall for r in runs[f"trace-scorer --json --jobs {jobs[0]}"])
            for j in jobs[1:]:
                other = statistics.median(r.wall for r in runs[f"trace-scorer --json --jobs {j}"])
                print(f"  --jobs {j} vs --jobs {jobs[0]}: {base / other:.2f}× faster")
        return 0 if agreed else 1
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

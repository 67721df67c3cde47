"""Benchmark: Langfuse's 22 managed evaluators run by trace-scorer (``llm_judge``, ``evaluator =
"langfuse:NAME"``) over a generated corpus, against the OpenAI stand-in.

Both stand-ins run as processes on 127.0.0.1: the Langfuse one plays 4.16.0 (its managed evaluators are
our own short templates with the real names, variables and output shapes: standins/langfuse_evaluators.py)
and holds ``--traces`` generated production traces (golden answers in their metadata); the OpenAI one
answers every judge call after ``--latency`` seconds, as OpenAI's API does (its profile: requests in
parallel, ``json_schema``). For each evaluator, the real command runs —
``trace-scorer backfill`` of the corpus's window with one target holding that evaluator, a fresh state —
and the figures are the judge calls and tokens the stand-in served and the command's wall time, each
per 100 traces. Variables without a value on a trace (e.g. a context) skip it: the skipped traces are
printed too.

Run:  PYTHONPATH=. python bench/bench_langfuse_evaluators.py [--traces 100] [--latency 0.05] [--models 1]
      [--only Helpfulness,Toxicity]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standins.faults import FaultConfig
from standins.generate import Scenario
from standins.handles import start_langfuse, start_openai
from standins.langfuse_evaluators import MANAGED
from standins.langfuse_server import LangfuseOptions
from standins.openai_server import OpenAIOptions

END = "2026-11-01T00:00:00Z"
#: Where the corpus's traces carry what the managed evaluators' variables ask for.
VARIABLES = {
    "ground_truth": "$.trace.metadata.expected_answer",
    "context": ["$.observations.by_type.RETRIEVER.output", "$.observations.by_type.TOOL.output"],
}


def settings(langfuse_url: str, llm_url: str, name: str, variables: list[str], models: int) -> str:
    mapped = {v: p for v, p in VARIABLES.items() if v in variables}
    lines = [
        '[log]\nlevel = "ERROR"',
        f'[langfuse]\nbase_url = "{langfuse_url}"',
        "[http]\nenabled = false",
        "[judge]\ntracing = false",
        "[[providers]]",
        'name = "local"',
        f'base_url = "{llm_url}/v1"',
        f"chat_models = {[f'judge-{i}' for i in range(models)]!r}".replace("'", '"'),
        "max_concurrency = 16",
        "[[targets]]",
        'name = "ev"',
        'max_window = "6h"',
        "  [[targets.metrics]]",
        '  metric = "llm_judge"',
        '  name = "judged"',
        f'  evaluator = "langfuse:{name}"',
    ]
    if mapped:
        lines.append("  [targets.metrics.variables]")
        for variable, path in mapped.items():
            value = f'"{path}"' if isinstance(path, str) else "[" + ", ".join(f'"{p}"' for p in path) + "]"
            lines.append(f"  {variable} = {value}")
    return "\n".join(lines) + "\n"


def run_one(langfuse_url: str, llm_url: str, evaluator: dict[str, Any], models: int) -> tuple[int, str, float]:
    """``backfill`` of the corpus with one target judged by ``evaluator``, on a fresh state: exit code,
    what it printed, seconds."""
    from trace_scorer import cli

    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "settings.toml"
        text = settings(langfuse_url, llm_url, evaluator["name"], evaluator["variables"], models)
        config.write_text(text + f'[state]\npath = "{folder}/state.db"\n')
        out = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(
                ["backfill", "--config", str(config), "--target", "ev", "--from", "2026-10-31", "--to", END]
            )
        return code, out.getvalue(), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the judge takes to answer")
    parser.add_argument("--models", type=int, default=1, help="judge models in the panel")
    parser.add_argument("--only", default="", help="comma-separated evaluator names (default: all 22)")
    args = parser.parse_args()

    chosen = [e for e in MANAGED if not args.only or e["name"] in args.only.split(",")]
    scenario = Scenario(
        seed=7, traces=args.traces, spacing=5.0, end=END, references_rate=1.0, hostile_rate=0.0, datasets=()
    )
    langfuse = start_langfuse(LangfuseOptions(version="4.16.0", scenario=scenario), mode="process")
    llm = start_openai(OpenAIOptions(profile="openai", faults=FaultConfig(latency=args.latency)), mode="process")
    os.environ["LANGFUSE_PUBLIC_KEY"] = langfuse.public_key
    os.environ["LANGFUSE_SECRET_KEY"] = langfuse.secret_key
    per = 100 / args.traces
    print(
        f"{len(chosen)} managed evaluators, {args.traces} traces, {args.models} judge model(s), "
        f"judge latency {args.latency:g} s; figures per 100 traces"
    )
    print(
        f"{'evaluator':32} {'variables':34} {'scored':>6} {'skipped':>7} {'calls':>6} {'prompt tok':>10} "
        f"{'compl tok':>9} {'seconds':>8}"
    )
    totals = [0.0, 0.0, 0.0, 0.0]
    try:
        # Once before the table: the first command in this process pays the imports (openai, langfuse…).
        run_one(langfuse.url, llm.url, chosen[0], args.models)
        for evaluator in chosen:
            before = llm.stats()
            code, out, seconds = run_one(langfuse.url, llm.url, evaluator, args.models)
            after = llm.stats()
            if code != 0:
                raise SystemExit(f"{evaluator['name']}: backfill exited {code}: {out}")
            found = re.search(r"(\d+) scored, \d+ not finished yet, (\d+) skipped", out)
            scored, skipped = (int(found.group(1)), int(found.group(2))) if found else (-1, -1)
            calls = sum(after["by_model"].values()) - sum(before["by_model"].values())
            prompt = after["prompt_tokens"] - before["prompt_tokens"]
            completion = after["completion_tokens"] - before["completion_tokens"]
            figures = [calls * per, prompt * per, completion * per, seconds * per]
            totals = [t + f for t, f in zip(totals, figures, strict=True)]
            print(
                f"{evaluator['name']:32} {', '.join(evaluator['variables']):34} {scored:>6} {skipped:>7} "
                f"{figures[0]:>6.0f} {figures[1]:>10.0f} {figures[2]:>9.0f} {figures[3]:>8.2f}"
            )
        print(
            f"{'all':32} {'':34} {'':>6} {'':>7} {totals[0]:>6.0f} {totals[1]:>10.0f} {totals[2]:>9.0f} "
            f"{totals[3]:>8.2f}"
        )
    finally:
        langfuse.stop()
        llm.stop()


if __name__ == "__main__":
    main()

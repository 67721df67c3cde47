"""``llm_judge`` on a real llama.cpp server: per output type (NUMERIC, BOOLEAN, CATEGORICAL, written in the
settings) and per Langfuse-managed evaluator (Helpfulness, Correctness, Toxicity, by name), the judge
calls, tokens, seconds and share of Failed per 100 traces of a generated corpus.

One ``llama_cpp.server`` process (SmolLM2-135M-Instruct, one thread, one completion at a time: the
provider's ``max_concurrency = 1``) from the environment ``bench/real_llm/setup.sh`` built; the Langfuse
stand-in playing 4.16.0 with ``--traces`` generated production traces (golden answers in their metadata).
For each judge, ``trace-scorer backfill`` of the corpus's window runs in this process with one target
holding that judge alone and a fresh state. Figures: the chat requests the server answered (its access
log: 200s, and the 500 that refuses ``json_schema`` once per run), the answers and tokens the judge
counted (valid and invalid answers), the command's wall time, and the traces scored, failed (no valid
answer: nothing posted) and skipped (a variable without a value).

    REAL_LLM_VENV=VENV PYTHONPATH=. .venv/bin/python bench/real_llm/measure_llm_judge.py [--traces 50]
        [--only accuracy,safe,tone,Helpfulness,Correctness,Toxicity] [--max-tokens 256]
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
from collections import Counter
from pathlib import Path
from typing import Any

from standins.generate import Scenario
from standins.handles import start_langfuse
from standins.langfuse_server import LangfuseOptions
from tests.support.real_llm import (
    EVALUATOR_VARIABLES,
    LLM_JUDGES,
    LlamaServer,
    evaluator_metric,
    find_server,
    worker_settings,
)
from trace_scorer import cli
from trace_scorer.ops.telemetry import Telemetry

END = "2026-11-01T00:00:00Z"
KINDS = {"accuracy": "NUMERIC 1-5", "safe": "BOOLEAN", "tone": "CATEGORICAL"}

#: What the judge counted in this process (Telemetry.judge_call, wrapped below): answers by outcome, tokens.
COUNTED: Counter[str] = Counter()


def _counting(original: Any) -> Any:
    def judge_call(self: Telemetry, model: str, outcome: str = "ok", **usage: Any) -> None:
        COUNTED[outcome] += 1
        COUNTED["prompt"] += usage.get("prompt_tokens", 0)
        COUNTED["completion"] += usage.get("completion_tokens", 0)
        original(self, model, outcome, **usage)

    return judge_call


def run_one(server: LlamaServer, langfuse_url: str, name: str, max_tokens: int) -> tuple[int, str, str, float]:
    """``backfill`` of the corpus with one target judged by ``name``: exit code, summary, log, seconds."""
    metric = LLM_JUDGES[name] if name in LLM_JUDGES else evaluator_metric(name)
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "settings.toml"
        text = worker_settings(server, langfuse_url, Path(folder) / "state.db", metric, max_tokens=max_tokens)
        config.write_text(text.replace('level = "INFO"', 'level = "WARNING"\nformat = "json"'))
        out, err = io.StringIO(), io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(
                ["backfill", "--config", str(config), "--target", "judged", "--from", "2026-10-31", "--to", END]
            )
        return code, out.getvalue(), err.getvalue(), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=50)
    parser.add_argument("--only", default=",".join([*LLM_JUDGES, *EVALUATOR_VARIABLES]))
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    install = find_server()
    if isinstance(install, str):
        print(install, file=sys.stderr)
        return 2
    Telemetry.judge_call = _counting(Telemetry.judge_call)  # type: ignore[method-assign]
    scenario = Scenario(
        seed=7, traces=args.traces, spacing=5.0, end=END, references_rate=1.0, hostile_rate=0.0, datasets=()
    )
    per = 100 / args.traces
    print(
        f"{args.traces} generated traces, llama-cpp-python 0.3.36 + SmolLM2-135M-Instruct (1 thread), "
        f"max_tokens {args.max_tokens}; figures per 100 traces"
    )
    header = (
        f"{'judge':14} {'output':14} {'scored':>6} {'failed':>6} {'skipped':>7} {'requests':>8} "
        f"{'answers':>7} {'invalid':>7} {'prompt tok':>10} {'compl tok':>9} {'seconds':>8} {'failed %':>8}"
    )
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        server = LlamaServer(install, "smollm2", Path(tmp) / "server.log").start()
        langfuse = start_langfuse(LangfuseOptions(version="4.16.0", scenario=scenario))
        os.environ["LANGFUSE_PUBLIC_KEY"] = langfuse.public_key
        os.environ["LANGFUSE_SECRET_KEY"] = langfuse.secret_key
        try:
            for name in args.only.split(","):
                before_requests, before = server.requests(), Counter(COUNTED)
                code, out, err, seconds = run_one(server, langfuse.url, name, args.max_tokens)
                if code != 0:
                    print(f"{name}: backfill exited {code}: {out}{err[-2000:]}", file=sys.stderr)
                    return 1
                found = re.search(r"(\d+) scored, \d+ not finished yet, (\d+) skipped, (\d+) failed", out)
                scored, skipped, failed = map(int, found.groups()) if found else (-1, -1, -1)
                served = server.requests() - before_requests
                requests = sum(n for (path, _), n in served.items() if path == "/v1/chat/completions")
                counted = COUNTED - before
                answers = counted["ok"] + counted["invalid"]
                share = 100 * failed / (scored + failed) if scored + failed > 0 else 0.0
                print(
                    f"{name:14} {KINDS.get(name, 'NUMERIC (managed)'):14} {scored:>6} {failed:>6} {skipped:>7} "
                    f"{requests * per:>8.0f} {answers * per:>7.0f} {counted['invalid'] * per:>7.0f} "
                    f"{counted['prompt'] * per:>10.0f} {counted['completion'] * per:>9.0f} {seconds * per:>8.0f} "
                    f"{share:>7.0f}%",
                    flush=True,
                )
                reasons = sorted(set(re.findall(r'"error": "([^"]{0,200})', err)))
                for reason in reasons[:3]:
                    print(f"    failed: {reason}", flush=True)
        finally:
            langfuse.stop()
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

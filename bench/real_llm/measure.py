"""The shipped examples (8 samples) judged by a two-model panel on a real llama.cpp server: requests,
seconds, scores produced, failures (issue 24's "before and after").

Two ``llama_cpp.server`` processes (SmolLM2-135M-Instruct, one per panel model, each one provider) from
the environment ``bench/real_llm/setup.sh`` built; ``trace-scorer score examples/samples --json`` with the
judged metrics (agent_goal_accuracy, topic_adherence, aspect_critic) against them.

    REAL_LLM_VENV=VENV PYTHONPATH=. .venv/bin/python bench/real_llm/measure.py [--code DIR] [--limit SECONDS]

``--code DIR`` runs another checkout's ``trace_scorer`` package (e.g. main's: ``git archive main
trace_scorer | tar -x -C DIR``) with this environment's dependencies; ``--limit`` stops a run that takes
longer (reported as such).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.paths import ROOT
from tests.support.real_llm import LlamaServer, find_server, judged_settings

#: Runs ``trace_scorer`` from the directory given first (not this checkout's editable install).
_RUN_FROM = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
    "sys.path.insert(0, sys.argv.pop(1)); from trace_scorer.cli import main; sys.exit(main(sys.argv[1:]))"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, default=ROOT, help="the directory holding the trace_scorer package")
    parser.add_argument("--limit", type=float, default=3600.0, help="seconds before the run is stopped")
    parser.add_argument("--max-concurrency", type=int, default=1)
    args = parser.parse_args()
    install = find_server()
    if isinstance(install, str):
        print(install, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        servers = [LlamaServer(install, alias, work / f"{alias}.log") for alias in ("smollm2-a", "smollm2-b")]
        try:
            for server in servers:
                server.start()
            config = work / "settings.toml"
            config.write_text(judged_settings(servers, max_concurrency=args.max_concurrency))
            command = [
                sys.executable,
                "-c",
                _RUN_FROM,
                str(args.code.resolve()),
                "score",
                str(ROOT / "examples" / "samples"),
            ]
            command += ["--config", str(config), "--json"]
            started = time.monotonic()
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=args.limit, check=False)
                finished, out, err = True, done.stdout, done.stderr
            except subprocess.TimeoutExpired as expired:
                finished = False
                out = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
                err = (expired.stderr or b"").decode() if isinstance(expired.stderr, bytes) else expired.stderr or ""
            seconds = time.monotonic() - started
            requests = {s.alias: dict(s.requests()) for s in servers}
        finally:
            for server in servers:
                server.stop()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    scores = sum(len(line["scores"]) for line in lines)
    failures = sum(len(line["failed"]) for line in lines)
    chat = {
        a: {status: n for (path, status), n in r.items() if path == "/v1/chat/completions"} for a, r in requests.items()
    }
    total = sum(n for by_status in chat.values() for n in by_status.values())
    print(f"code               {args.code}")
    print(f"finished           {finished} ({seconds:.0f} s{'' if finished else ', stopped at --limit'})")
    print(f"chat requests      {total}  {json.dumps(chat)}")
    print(f"samples answered   {len(lines)} of 8")
    print(f"judged scores      {scores}")
    print(f"failures           {failures}")
    reasons = sorted({reason[:160] for line in lines for reason in line["failed"].values()})
    for reason in reasons[:5]:
        print(f"  failed: {reason}")
    if not finished or not lines:
        print(err[-1500:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

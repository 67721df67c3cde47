"""Writes ``production.jsonl``: production traces from the stand-in's generator (standins/generate.py),
one per SDK format and one per production fault, as ``GET /api/public/v2/observations`` returns their
rows with the field groups the worker reads. Run from the repository root:
``python examples/production/generate.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from standins.formats import FORMATS  # noqa: E402
from standins.generate import Corpus, Scenario  # noqa: E402
from standins.langfuse_query import project  # noqa: E402
from standins.tasks import PRODUCTION_FAULTS  # noqa: E402
from trace_scorer.langfuse.reads.v4 import BODY_FIELDS  # noqa: E402

SCENARIO = Scenario(seed=11, traces=120, datasets=(), fault_rate=0.5, deviation_rate=0.0, topics_rate=0.0,
                    duplicate_rate=0.0, end="2026-11-20T12:00:00Z")  # fmt: skip


def main() -> None:
    corpus = Corpus(SCENARIO)
    chosen: dict[tuple[str, str | None], str] = {}
    for trace_id in corpus.expected_scored():
        header = corpus.find(trace_id)
        assert header is not None
        fault = corpus.fault_of(trace_id)
        key = (header.format, None) if fault is None else ("", fault)
        chosen.setdefault(key, trace_id)
    wanted = [(fmt, None) for fmt in FORMATS] + [("", fault) for fault in PRODUCTION_FAULTS]
    rows = []
    for key in wanted:
        header = corpus.find(chosen[key])
        assert header is not None
        rows += [project(record.row, BODY_FIELDS) for record in corpus.render(header).records]
    rows.sort(key=lambda row: row["startTime"], reverse=True)
    out = Path(__file__).with_name("production.jsonl")
    out.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    print(f"{out}: {len(wanted)} traces, {len(rows)} rows")


if __name__ == "__main__":
    main()

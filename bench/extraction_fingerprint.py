"""SHA-256 of what extraction makes of the example corpus and the stand-in's generated formats: run it
before and after a change that must not change extraction (``--code DIR``: another copy of the package).

Samples (their JSON) of: every ``examples/**/*.jsonl`` file of rows through the offline reader (per trace,
and per observation); and stand-in corpora of every format (``standins.formats.FORMATS`` and
``SDK_FORMATS``, hostile traces included, a third of the observations returned twice), read as traces,
as observations (GENERATION and TOOL), as sessions and joined with their experiment items (the worker's
typed ``ExperimentItem``, or the document made of it for code from before extraction took it). Prints one
digest per part and one over all.

    PYTHONPATH=. python bench/extraction_fingerprint.py [--code DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def digest(samples: Iterable[Any]) -> tuple[int, str]:
    """How many samples, and the SHA-256 (first 16 hex) of their JSON, one a line."""
    sha = hashlib.sha256()
    count = 0
    for sample in samples:
        sha.update(sample.model_dump_json().encode() + b"\n")
        count += 1
    return count, sha.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", help="a directory holding another trace_scorer package to run")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    from standins.formats import FORMATS, SDK_FORMATS
    from standins.generate import Corpus, Scenario
    from trace_scorer.data.times import parse_timestamp
    from trace_scorer.extract import (
        extract_sample,
        extract_session,
        index_items,
        looks_like_experiment_item,
        looks_like_observation_row,
        samples_from_rows,
    )
    from trace_scorer.extract.observations import observation_samples
    from trace_scorer.langfuse.reads.v4 import _json_value
    from trace_scorer.langfuse.types import ExperimentItem

    try:  # the worker's item as extraction takes it; before it took a typed item, the camelCase document
        from trace_scorer.extract.items import item_document

        as_given: Any = lambda item: item  # noqa: E731
    except ImportError:
        from trace_scorer.worker.dataset_runs import item_document  # type: ignore[attr-defined,no-redef]

        as_given = item_document

    def wanted(row: Any) -> bool:
        return str(row.get("type")) in ("GENERATION", "TOOL")

    parts: dict[str, tuple[int, str]] = {}
    for path in sorted((ROOT / "examples").rglob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in records if looks_like_observation_row(r)]
        items = index_items([r for r in records if looks_like_experiment_item(r)])[0]
        if rows or items:
            samples = [*samples_from_rows(rows, items=items), *samples_from_rows(rows, observations=lambda r: True)]
            parts[str(path.relative_to(ROOT))] = digest(samples)

    now = datetime(2030, 1, 1, tzinfo=UTC)
    every = tuple(dict.fromkeys(FORMATS + SDK_FORMATS))
    for name, formats, hostile in (("formats", FORMATS, 0.0), ("sdk", SDK_FORMATS, 0.0), ("hostile", every, 0.5)):
        scenario = Scenario(
            seed=11,
            traces=120,
            formats=formats,
            hostile_rate=hostile,
            duplicate_rate=0.3,
            huge_bytes=3000,
            references_rate=0.5,
            end="2026-10-01T00:00:00+00:00",
        )
        corpus = Corpus(scenario)
        traces, observations, sessions = [], [], {}
        for index in range(len(corpus.production)):
            header = corpus.production.header(index)
            rows = corpus.render(header).visible_rows(now)
            traces.append(extract_sample(rows, trace_id=header.trace_id))
            observations += observation_samples(rows, wanted, trace_id=header.trace_id)
            sessions.setdefault(corpus.session_of(header), []).extend(rows)
        joined = []
        for row in corpus.experiment_item_rows():
            item = ExperimentItem(
                trace_id=row["traceId"],
                observation_id=row["id"],
                experiment_id=row["experimentId"],
                experiment_name=row.get("experimentName") or "",
                dataset_item_id=row["experimentItemId"],
                dataset_id=row.get("experimentDatasetId"),
                start_time=parse_timestamp(row["startTime"]),
                environment=row.get("environment"),
                input=_json_value(row.get("input")),
                output=_json_value(row.get("output")),
                expected_output=_json_value(row.get("expectedOutput")),
                metadata=row.get("metadata") or {},
                item_metadata=row.get("experimentItemMetadata") or {},
            )
            header = corpus.find(item.trace_id)
            rows = corpus.render(header).visible_rows(now) if header else []
            joined.append(extract_sample(rows, item=as_given(item), trace_id=item.trace_id))
        parts[f"corpus {name} traces"] = digest(traces)
        parts[f"corpus {name} observations"] = digest(observations)
        parts[f"corpus {name} sessions"] = digest(extract_session(r, session_id=s) for s, r in sorted(sessions.items()))
        parts[f"corpus {name} items"] = digest(joined)
    for part, (count, sha) in parts.items():
        print(f"{part}: {count} samples, sha256 {sha}")
    print("all:", hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

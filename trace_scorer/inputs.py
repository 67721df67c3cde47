"""Read offline input files (JSON arrays or JSON lines, or folders of them) into Samples.

A record that cannot be read is reported with its file and line (or array index) and skipped; the
rest of the file is still read. Nothing here raises for bad data except a path that does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trace_scorer.config.references import ReferenceSettings
from trace_scorer.extract import (
    index_items,
    looks_like_experiment_item,
    looks_like_observation_row,
    samples_from_rows,
)
from trace_scorer.sample import Sample

INPUT_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass(frozen=True)
class ReadError:
    """A record that could not be read: where it is and why."""

    path: Path
    where: str  # "line 7" or "item 3"
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.reason}"


@dataclass(frozen=True)
class Record:
    path: Path
    where: str
    data: Any


@dataclass
class LoadedInput:
    samples: list[Sample] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files to read: files as given, folders searched recursively for .json/.jsonl files."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in INPUT_SUFFIXES))
        elif path.exists():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return files


def read_records(path: Path) -> Iterator[Record | ReadError]:
    """JSON values in ``path``: the elements of a JSON array, a single JSON object, or one per line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield ReadError(path, "file", f"cannot read: {exc}")
        return
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            yield ReadError(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}")
            return
        for index, item in enumerate(document):
            yield Record(path, f"item {index}", item)
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield Record(path, f"line {number}", json.loads(line))
        except json.JSONDecodeError as exc:
            if number == 1 and stripped.startswith("{") and "\n" in text.strip():
                # A pretty-printed single object, not JSON lines.
                try:
                    yield Record(path, "line 1", json.loads(text))
                except json.JSONDecodeError as whole:
                    yield ReadError(path, f"line {whole.lineno}", f"invalid JSON: {whole.msg}")
                return
            yield ReadError(path, f"line {number}", f"invalid JSON: {exc.msg}")


def sample_from_record(record: Record) -> Sample | ReadError:
    """A sample-file record → Sample; ``id`` defaults to the trace id, else ``file:line``."""
    data = record.data
    if not isinstance(data, Mapping):
        return ReadError(record.path, record.where, f"expected a JSON object, got {type(data).__name__}")
    data = dict(data)
    if data.get("id") is None:
        data["id"] = data.get("trace_id") or f"{record.path.name}:{record.where.split()[-1]}"
    try:
        return Sample.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return ReadError(record.path, record.where, f"{where}: {problem.removeprefix('Value error, ')}{more}")


def load_inputs(paths: Sequence[Path], references: ReferenceSettings | None = None) -> LoadedInput:
    """Read every record of every input file into Samples, collecting what could not be read.

    Each record is recognised by its shape: a sample, an exported observation row, or an experiment
    item. Observation rows are grouped by ``traceId`` into one sample per trace (extraction), with the
    experiment item of the same trace, wherever it was read, giving the expected output and references.
    """
    loaded = LoadedInput()
    rows: list[Mapping[str, Any]] = []
    items: list[Record] = []
    for path in input_files(paths):
        for record in read_records(path):
            if isinstance(record, ReadError):
                loaded.errors.append(record)
            elif looks_like_observation_row(record.data):
                rows.append(record.data)
            elif looks_like_experiment_item(record.data):
                items.append(record)
            elif isinstance(result := sample_from_record(record), ReadError):
                loaded.errors.append(result)
            else:
                loaded.samples.append(result)
    if rows or items:
        by_trace, problems = index_items(item.data for item in items)
        for position, reason in problems:
            loaded.errors.append(ReadError(items[position].path, items[position].where, reason))
        loaded.samples.extend(samples_from_rows(rows, items=by_trace, references=references))
    return loaded

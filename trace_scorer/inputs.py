"""Read offline input files (JSON arrays or JSON lines, or folders of them) into Samples.

A record that cannot be read is reported with its file and line (or array index) and skipped; the
rest of the file is still read. Nothing here raises for bad data except a path that does not exist.
"""

from __future__ import annotations

import functools
import json
import os
import re
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


#: Records nested deeper than this are refused: every reader after this one (validation, extraction,
#: metrics, JSON output) may recurse once per level, and no real trace comes near it.
MAX_DEPTH = 100


@dataclass
class InputFiles:
    """The files found under the given paths, and the folders or files that could not be listed."""

    files: list[Path] = field(default_factory=list)
    errors: list[ReadError] = field(default_factory=list)


def find_input_files(paths: Sequence[Path]) -> InputFiles:
    """The files to read: files as given, folders searched recursively for .json/.jsonl/.ndjson files.

    A folder that cannot be listed (permissions, a broken link…) is reported, never skipped silently.
    Raises FileNotFoundError for a path that does not exist.
    """
    found = InputFiles()
    for path in paths:
        if path.is_dir():
            files: list[Path] = []
            for folder, _subfolders, names in os.walk(path, onerror=functools.partial(_unlisted, found, path)):
                files.extend(Path(folder, n) for n in names if Path(n).suffix in INPUT_SUFFIXES)
            found.files.extend(sorted(f for f in files if f.is_file()))
        elif path.exists():
            found.files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return found


def _unlisted(found: InputFiles, top: Path, exc: OSError) -> None:
    where = Path(exc.filename) if exc.filename else top
    found.errors.append(ReadError(where, "folder", f"cannot read: {exc.strerror or exc}"))


def input_files(paths: Sequence[Path]) -> list[Path]:
    """The files :func:`find_input_files` finds (folders that cannot be listed are left out)."""
    return find_input_files(paths).files


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (no NaN or Infinity)")


def _parse(text: str) -> Any:
    """``json.loads`` that refuses NaN/Infinity; raises ValueError (RecursionError too for absurd nesting)."""
    return json.loads(text, parse_constant=_refuse_constant)


def _parse_problem(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg}"
    if isinstance(exc, RecursionError):
        return f"nested too deeply (more than {MAX_DEPTH} levels)"
    return f"invalid JSON: {exc}"


def _value_problem(value: Any) -> str | None:
    """What makes a parsed value unusable: nesting deeper than MAX_DEPTH, or text that is not valid
    Unicode (an invalid UTF-8 byte, read as a lone surrogate, or a lone ``\\udXXX`` escape)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            texts: tuple[str, ...] = (item,)
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                return f"nested too deeply (more than {MAX_DEPTH} levels)"
            children = list(item.values()) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
            texts = tuple(item) if isinstance(item, dict) else ()
        else:
            continue
        for text in texts:
            if _SURROGATE.search(text):
                return "not valid UTF-8 text (an invalid byte or a lone surrogate)"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _record(path: Path, where: str, text: str) -> Record | ReadError:
    try:
        value = _parse(text)
    except (ValueError, RecursionError) as exc:
        return ReadError(path, where, _parse_problem(exc))
    problem = _value_problem(value)
    return ReadError(path, where, problem) if problem else Record(path, where, value)


def _utf8_problem(raw: bytes) -> str | None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"
    return None


def read_records(path: Path) -> Iterator[Record | ReadError]:
    """JSON values in ``path``: the elements of a JSON array, a single JSON object, or one per line.

    Each bad record is reported and skipped, the rest read: a line with an invalid UTF-8 byte is a bad
    record (the file's other lines are read), as is one nested deeper than ``MAX_DEPTH`` or holding a
    number too long to convert.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        yield ReadError(path, "file", f"cannot read: {exc.strerror or exc}")
        return
    # Invalid bytes become lone surrogates, so that one bad byte costs one record, not the file.
    text = raw.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            document = _parse(text)
        except (ValueError, RecursionError) as exc:
            at = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "file"
            yield ReadError(path, at, _parse_problem(exc))
            return
        for index, item in enumerate(document):
            problem = _value_problem(item)
            yield ReadError(path, f"item {index}", problem) if problem else Record(path, f"item {index}", item)
        return
    lines = raw.split(b"\n")
    for number, line_bytes in enumerate(lines, start=1):
        line = line_bytes.decode("utf-8", errors="surrogateescape")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        result = _record(path, f"line {number}", line)
        if (
            isinstance(result, ReadError)
            and number == 1
            and stripped.startswith("{")
            and "\n" in text.strip()
            and result.reason.startswith("invalid JSON")
        ):
            # A pretty-printed single object, not JSON lines.
            whole = _record(path, "line 1", text)
            if isinstance(whole, ReadError) and whole.reason.startswith("invalid JSON"):
                whole = _whole_file_error(path, text)
            yield whole
            return
        if isinstance(result, ReadError) and (problem := _utf8_problem(line_bytes)):
            result = ReadError(path, f"line {number}", problem)
        yield result


def _whole_file_error(path: Path, text: str) -> ReadError:
    try:
        _parse(text)
    except json.JSONDecodeError as exc:
        return ReadError(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}")
    except (ValueError, RecursionError) as exc:
        return ReadError(path, "line 1", _parse_problem(exc))
    return ReadError(path, "line 1", "invalid JSON")


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
    found = find_input_files(paths)
    loaded.errors.extend(found.errors)
    for path in found.files:
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

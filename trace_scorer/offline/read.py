"""Read offline input files (JSON arrays or JSON lines, or folders of them) into Samples.

A record that cannot be read is reported with its file and line (or array index) and skipped; the
rest of the file is still read. Nothing here raises for bad data except a path that does not exist.

Speed (issue 15): JSON is parsed by pydantic-core's parser (jiter) first. For every text it accepts, it gives
the value the standard library gives, and it refuses NaN/Infinity (asked to), lone surrogates and invalid
UTF-8, which this module refuses too; what it refuses is read again by the standard library, whose
messages the reports quote. JSON lines files can be read a range of lines at a time (``split_file``,
``FilePart``), which is how ``score --jobs`` spreads a file over processes. A JSON array is read as a
stream, an item at a time (``array_records``, issue 22), by the standard library's decoder.
"""

from __future__ import annotations

import codecs
import functools
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError
from pydantic_core import from_json

from trace_scorer.config.common import errors_in_one_line
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


def _too_deep(value: Any) -> bool:
    """Whether containers nest deeper than MAX_DEPTH (strings need no look: jiter refused bad text)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        for child in children:
            if type(child) is dict or type(child) is list:
                if depth >= MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def _fast_value(raw: bytes) -> tuple[bool, Any]:
    """``(True, value)`` when jiter reads ``raw`` and the value passes the checks of ``_value_problem``;
    ``(False, None)`` otherwise (then the standard library's path reads it and says what is wrong)."""
    try:
        value = from_json(raw, allow_inf_nan=False)
    except ValueError:
        return False, None
    # Nesting can only pass MAX_DEPTH with more brackets than that: most records need no walk.
    nested = type(value) is dict or type(value) is list
    if nested and raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _too_deep(value):
        return False, None
    return True, value


_BOM = "\ufeff".encode()


def line_records(path: Path, data: bytes, first_line: int = 1) -> Iterator[Record | ReadError]:
    """The records of JSON lines ``data``, whose first line is line ``first_line`` of ``path``.

    Blank lines are skipped; a line that cannot be read is a :class:`ReadError` naming it, the next
    lines are still read. Line 1 may start with a byte-order mark.
    """
    for number, line_bytes in enumerate(data.split(b"\n"), start=first_line):
        content = line_bytes.removeprefix(_BOM) if number == 1 else line_bytes
        if not content.strip():
            continue
        where = f"line {number}"
        ok, value = _fast_value(content)
        if ok:
            yield Record(path, where, value)
            continue
        line = content.decode("utf-8", errors="surrogateescape")
        if not line.strip():
            continue
        result = _record(path, where, line)
        # the column counts the bytes of the line as it is in the file (a byte-order mark too)
        if isinstance(result, ReadError) and (problem := _utf8_problem(line_bytes)):
            result = ReadError(path, where, problem)
        yield result


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
    number too long to convert. An array is read as a stream (:func:`array_records`): its items are
    never all in memory at once.
    """
    try:
        with path.open("rb") as file:
            head = file.read(_HEAD_BYTES)
            if _start(head) == b"[":
                yield from array_records(path, file, head)
                return
            raw = head + file.read()
    except OSError as exc:
        yield ReadError(path, "file", f"cannot read: {exc.strerror or exc}")
        return
    yield from line_records(path, raw) if is_json_lines(raw) else document_records(path, raw)


#: Characters ``str.lstrip`` strips and ``bytes.lstrip`` does not (the file-separator controls).
_STR_ONLY_SPACE = frozenset(b"\x1c\x1d\x1e\x1f")


def _start(raw: bytes) -> bytes:
    """The first byte after the byte-order mark and ASCII white space."""
    return raw.removeprefix(_BOM).lstrip()[:1]


def is_json_lines(raw: bytes) -> bool:
    """Whether a file's bytes are JSON lines, rather than one document: a JSON array, or a pretty-printed
    object (one whose first line alone is not JSON)."""
    start = _start(raw)
    if start == b"[":
        return False
    if start == b"{":
        first_line = raw.split(b"\n", 1)[0].removeprefix(_BOM)
        if _fast_value(first_line)[0]:
            return True  # the usual case, settled without decoding the whole file
    elif not (start and (start[0] >= 0x80 or start[0] in _STR_ONLY_SPACE)):
        return True
    # Invalid bytes become lone surrogates, so that one bad byte costs one record, not the file.
    text = raw.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return False
    if not (stripped.startswith("{") and "\n" in text.strip()):
        return True
    line = raw.split(b"\n", 1)[0].decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    if not line.strip():
        return True
    first = _record(Path(), "line 1", line)
    return not (isinstance(first, ReadError) and first.reason.startswith("invalid JSON"))


def document_records(path: Path, raw: bytes) -> list[Record | ReadError]:
    """The records of a file that is one document (see :func:`is_json_lines`): an array's items, or the
    pretty-printed object."""
    text = raw.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    if _start(raw) == b"[" or text.lstrip().startswith("["):
        return list(array_records(path, io.BytesIO(raw)))
    whole = _record(path, "line 1", text)
    if isinstance(whole, ReadError) and whole.reason.startswith("invalid JSON"):
        whole = _whole_file_error(path, text)
    return [whole]


#: Bytes read first, to tell an array from JSON lines without reading the whole file.
_HEAD_BYTES = 1 << 16
#: Bytes of an array read at a time (more when one item is longer).
ARRAY_CHUNK_BYTES = 1 << 20
#: A value cut by a chunk's end fails (or ends) this close to it; a string's error is at its start.
_CUT_MARGIN = 64
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
#: What makes an item worth walking for ``_value_problem``: a lone surrogate (an invalid byte read with
#: surrogateescape) or a ``\uD800``-``\uDFFF`` escape, which may decode to one.
_MAYBE_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def array_records(path: Path, file: BinaryIO, head: bytes = b"") -> Iterator[Record | ReadError]:
    """The items of the JSON array in ``file`` (``head``: its first bytes, already read), one at a time.

    Memory holds one chunk of the file and one item, never the whole array (issue 22: a 360 MB array
    peaked at 1.6 GB when parsed whole). Each item is read by the standard library's C decoder
    (``JSONDecoder.raw_decode``, a value at an offset), whose values and messages are those of
    :func:`_record`; the loop around it is ours because no well-kept parser fits: ijson's C backend
    refuses integers beyond 64 bits and turns a lone ``\\ud800`` into ``?``, and jiter cannot stream.
    An item with a problem (nesting, invalid text) is reported and the next one read; invalid JSON is
    reported with its line and ends the file (where the next item starts is unknown). Chunks end
    anywhere: a value cut by a chunk's end is read again once the next chunk is there (so a string left
    open is reported once the rest of the file is read).
    """
    decode = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape").decode
    buf = decode(head)
    eof = False
    constants: list[str] = []  # NaN/Infinity met in the item being read (an error of that item only)
    decoder = json.JSONDecoder(parse_constant=lambda name: constants.append(name))
    line = 1  # the line buf[0] is on

    def fill(keep_from: int) -> int:
        """Drop what is before ``keep_from``, read on (at least as much as is kept: a long item costs
        O(its length)); the new offset of what was at ``keep_from``."""
        nonlocal buf, eof, line
        line += buf.count("\n", 0, keep_from)
        rest = buf[keep_from:]
        chunk = file.read(max(ARRAY_CHUNK_BYTES, len(rest)))
        eof = not chunk
        buf = rest + decode(chunk, final=eof)
        return 0

    while not buf and not eof:
        fill(0)
    buf = buf.removeprefix("\ufeff")
    while not buf.strip(" \t\n\r") and not eof:
        fill(0)
    pos = _skip_space(buf, 0)
    if not buf.startswith("[", pos):  # white space JSON does not allow (str.lstrip's) before the array
        yield ReadError(path, f"line {1 + buf.count(chr(10), 0, pos)}", "invalid JSON: Expecting value")
        return
    pos += 1
    index = 0

    def where(offset: int) -> str:
        return f"line {line + buf.count(chr(10), 0, offset)}"

    while True:
        pos = _skip_space(buf, pos)
        if pos == len(buf) and not eof:
            pos = fill(pos)
            continue
        if index == 0 and buf.startswith("]", pos):
            pos += 1
            break
        constants.clear()
        try:
            value, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if not eof and (exc.msg.startswith("Unterminated string") or len(buf) - exc.pos < _CUT_MARGIN):
                pos = fill(pos)  # maybe cut by the chunk's end: read on
                continue
            yield ReadError(path, where(exc.pos), f"invalid JSON: {exc.msg}")
            return
        except (ValueError, RecursionError) as exc:
            yield ReadError(path, f"item {index}", f"{_parse_problem(exc)}; the items after it are not read")
            return
        if len(buf) - end < _CUT_MARGIN and not eof:
            pos = fill(pos)  # a number may go on in the next chunk ("-2.5" of "-2.5e-3")
            continue
        nested = buf.count("[", pos, end) + buf.count("{", pos, end) > MAX_DEPTH
        if constants:
            problem: str | None = f"invalid JSON: {constants[0]} is not JSON (no NaN or Infinity)"
        elif nested or _MAYBE_SURROGATE.search(buf, pos, end):
            problem = _value_problem(value)
        else:
            problem = None
        yield ReadError(path, f"item {index}", problem) if problem else Record(path, f"item {index}", value)
        index += 1
        pos = _skip_space(buf, end)
        while pos == len(buf) and not eof:
            pos = _skip_space(buf, fill(pos))
        if buf.startswith(",", pos):
            pos += 1
        elif buf.startswith("]", pos):
            pos += 1
            break
        else:
            yield ReadError(path, where(pos), "invalid JSON: Expecting ',' delimiter")
            return
    while not eof:
        pos = fill(pos)
    pos = _skip_space(buf, pos)
    if pos < len(buf):
        yield ReadError(path, where(pos), "invalid JSON: Extra data")


def _skip_space(text: str, pos: int) -> int:
    match = _JSON_SPACE.match(text, pos)
    return match.end() if match else pos


@dataclass(frozen=True)
class FilePart:
    """A part of an input file that can be read on its own: a range of JSON lines, or the whole file.

    ``data`` holds the part's bytes when the reader has them already; otherwise they are read from the
    file (a process given only the part reads them itself).
    """

    path: Path
    start: int = 0
    #: End of the byte range; None: the whole file, read by :func:`read_records`.
    end: int | None = None
    first_line: int = 1
    data: bytes | None = None

    @property
    def size(self) -> int:
        return 0 if self.end is None else self.end - self.start

    def records(self) -> Iterator[Record | ReadError]:
        if self.end is None:
            yield from read_records(self.path)
            return
        data = self.data
        if data is None:
            try:
                with self.path.open("rb") as file:
                    file.seek(self.start)
                    data = file.read(self.end - self.start)
            except OSError as exc:
                yield ReadError(self.path, "file", f"cannot read: {exc.strerror or exc}")
                return
        yield from line_records(self.path, data, self.first_line)


def split_file(path: Path, part_bytes: int, *, keep_data: bool = False) -> tuple[list[FilePart], int]:
    """``path`` as parts of about ``part_bytes`` each (whole lines), and its size in bytes.

    A file that is not JSON lines (an array, a pretty-printed object) or cannot be read is one part,
    read whole. ``keep_data``: the parts carry their bytes (for a reader in this process).
    """
    try:
        with path.open("rb") as file:
            head = file.read(_HEAD_BYTES)
            if _start(head) == b"[":  # an array: streamed whole by one reader
                return [FilePart(path)], os.fstat(file.fileno()).st_size
            raw = head + file.read()
    except OSError:
        return [FilePart(path)], 0  # read_records reports it
    if not is_json_lines(raw):
        return [FilePart(path)], len(raw)
    parts: list[FilePart] = []
    start, line = 0, 1
    while start < len(raw):
        newline = raw.find(b"\n", min(start + part_bytes, len(raw)) - 1)
        end = len(raw) if newline == -1 else newline + 1
        parts.append(FilePart(path, start, end, line, raw[start:end] if keep_data else None))
        line += raw.count(b"\n", start, end)
        start = end
    return parts, len(raw)


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
    if data.get("id") is None:
        data = dict(data)
        data["id"] = data.get("trace_id") or f"{record.path.name}:{record.where.split()[-1]}"
    try:
        return Sample.model_validate(data)
    except ValidationError as exc:
        first = errors_in_one_line(exc, most=1, root="", unknown_key="unknown field")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return ReadError(record.path, record.where, first + more)


def samples_of(
    records: Iterable[Record | ReadError], errors: list[ReadError], traces: list[Record]
) -> Iterator[Sample]:
    """The samples among ``records``, one at a time, each recognised by its shape; what could not be read
    goes to ``errors``, exported observation rows and experiment items to ``traces`` (extracted once
    everything is read: :func:`trace_samples`)."""
    for record in records:
        if isinstance(record, ReadError):
            errors.append(record)
        elif looks_like_observation_row(record.data) or looks_like_experiment_item(record.data):
            traces.append(record)
        elif isinstance(sample := sample_from_record(record), ReadError):
            errors.append(sample)
        else:
            yield sample


def trace_samples(
    traces: Sequence[Record],
    errors: list[ReadError],
    references: ReferenceSettings | None = None,
    observations: Callable[[Mapping[str, Any]], bool] | None = None,
) -> Iterator[Sample]:
    """The samples of the observation rows among ``traces``: one per trace (extraction), with the
    experiment item of the same trace, wherever it was read, giving the expected output and references;
    with ``observations`` (a target of scope "observation"), one per matching observation. An item that
    cannot be joined goes to ``errors``."""
    rows = [r.data for r in traces if looks_like_observation_row(r.data)]
    items = [r for r in traces if not looks_like_observation_row(r.data)]
    if not (rows or items):
        return iter(())
    by_trace, problems = index_items(item.data for item in items)
    for position, reason in problems:
        errors.append(ReadError(items[position].path, items[position].where, reason))
    return samples_from_rows(rows, items=by_trace, references=references, observations=observations)


def load_inputs(
    paths: Sequence[Path],
    references: ReferenceSettings | None = None,
    observations: Callable[[Mapping[str, Any]], bool] | None = None,
) -> LoadedInput:
    """Every sample of every input file at once, and what could not be read (the samples of the files,
    then those of the exported traces). ``score`` reads a part at a time instead (``offline.parts``)."""
    loaded = LoadedInput()
    found = find_input_files(paths)
    loaded.errors.extend(found.errors)
    traces: list[Record] = []
    for path in found.files:
        loaded.samples.extend(samples_of(read_records(path), loaded.errors, traces))
    loaded.samples.extend(trace_samples(traces, loaded.errors, references, observations))
    return loaded

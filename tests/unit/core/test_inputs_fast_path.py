"""Reading input files (issue 15): JSON is parsed by pydantic-core's parser first and by the standard library
for what it refuses, so a record reads the same and a bad one is reported with the same message as before;
a file read a part at a time (``split_file``) gives the same records as read whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_scorer.offline.read import MAX_DEPTH, ReadError, Record, load_inputs, read_records, split_file


def records(path: Path) -> list[tuple[str, str, object]]:
    return [
        ("error", r.where, r.reason) if isinstance(r, ReadError) else ("record", r.where, r.data)
        for r in read_records(path)
    ]


def nested(levels: int) -> str:
    """A sample whose metadata nests ``levels`` containers below the record (the record is one more)."""
    return '{"id": "n", "metadata": ' + '{"a": ' * (levels - 1) + "1" + "}" * (levels - 1) + "}"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": "a", "metadata": {"x": NaN}}', "invalid JSON: NaN is not JSON (no NaN or Infinity)"),
        ('{"id": "a", "metadata": {"x": -Infinity}}', "invalid JSON: -Infinity is not JSON (no NaN or Infinity)"),
        ('{"id": "a", "response": "\\udc80"}', "not valid UTF-8 text (an invalid byte or a lone surrogate)"),
        ('{"id": "a", "response": "x"', "invalid JSON: Expecting ',' delimiter"),
        ('{"id": "a", "response": "tab\there"}', "invalid JSON: Invalid control character at"),
        (nested(MAX_DEPTH + 1), f"nested too deeply (more than {MAX_DEPTH} levels)"),
    ],
)
def test_bad_lines_are_reported_as_before(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "ok"}\n' + line + "\n")
    (first, second) = records(path)
    assert first == ("record", "line 1", {"id": "ok"})
    assert second[:2] == ("error", "line 2") and str(second[2]).startswith(reason)


def test_values_read_as_the_standard_library_reads_them(tmp_path: Path) -> None:
    line = (
        '{"id": "v", "metadata": {"big": 123456789012345678901234567890, "huge": 1e400, "tiny": -1e-400, '
        '"neg0": -0, "float": 1.0, "dup": 1, "dup": 2, "text": "\\ud83d\\ude00 \\u00e9\\/"}}'
    )
    path = tmp_path / "s.jsonl"
    path.write_text(line + "\n")
    ((_, _, data),) = records(path)
    assert data == json.loads(line)
    metadata = data["metadata"]  # type: ignore[index]
    assert (
        type(metadata["big"]) is int
        and type(metadata["float"]) is float
        and list(metadata) == list(json.loads(line)["metadata"])
    )


def test_nesting_up_to_the_limit_is_read_and_many_shallow_brackets_are_no_nesting(tmp_path: Path) -> None:
    shallow = json.dumps({"id": "wide", "metadata": {"rows": [{"a": [1]} for _ in range(200)]}})
    path = tmp_path / "s.jsonl"
    path.write_text(nested(MAX_DEPTH) + "\n" + shallow + "\n")
    assert [kind for kind, _, _ in records(path)] == ["record", "record"]
    array = tmp_path / "a.json"
    array.write_text("[" + nested(MAX_DEPTH) + ", " + nested(MAX_DEPTH + 1) + "]")
    assert [(kind, where) for kind, where, _ in records(array)] == [("record", "item 0"), ("error", "item 1")]


def test_an_invalid_byte_on_a_line_after_a_byte_order_mark_is_located_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "response": "\xff"}\n{"id": "b"}\n')
    assert records(path) == [
        ("error", "line 1", "invalid UTF-8: byte 0xff at column 29"),  # the mark's 3 bytes counted
        ("record", "line 2", {"id": "b"}),
    ]


def test_a_pretty_printed_object_and_an_array_with_a_mark_and_spaces_are_one_document(tmp_path: Path) -> None:
    pretty = tmp_path / "p.json"
    pretty.write_text('{\n  "id": "p",\n  "response": "r"\n}\n')
    assert records(pretty) == [("record", "line 1", {"id": "p", "response": "r"})]
    array = tmp_path / "a.json"
    array.write_bytes(b'\xef\xbb\xbf \n [{"id": "x"}, 3]')
    assert records(array) == [("record", "item 0", {"id": "x"}), ("record", "item 1", 3)]
    assert [s.id for s in load_inputs([array]).samples] == ["x"]


@pytest.mark.parametrize("part_bytes", [1, 40, 1000, 1 << 20])
def test_a_file_read_in_parts_gives_what_it_gives_read_whole(tmp_path: Path, part_bytes: int) -> None:
    lines = [json.dumps({"id": f"s{i}", "response": "é" * (i % 5)}) for i in range(30)]
    lines[3], lines[7], lines[8] = "{bad", "", "   "
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode() + b"\r\n")
    whole = records(path)
    for keep_data in (True, False):
        parts, size = split_file(path, part_bytes, keep_data=keep_data)
        assert size == path.stat().st_size
        read = [r for part in parts for r in part.records()]
        assert [
            ("error", r.where, r.reason) if isinstance(r, ReadError) else ("record", r.where, r.data) for r in read
        ] == whole
        assert all(isinstance(r, Record | ReadError) for r in read)
    count = len(split_file(path, part_bytes)[0])
    assert count == 1 if part_bytes >= size else count > 1


def test_a_file_that_is_one_document_is_one_part(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_text(json.dumps([{"id": str(i)} for i in range(100)]))
    parts, _ = split_file(array, 10)
    assert len(parts) == 1 and parts[0].end is None
    assert [r.where for r in parts[0].records()] == [f"item {i}" for i in range(100)]

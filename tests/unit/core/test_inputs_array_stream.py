"""A JSON array file is read as a stream (issue 22 item 9): its items are never all in memory at once, and
each item reads as the whole document would, wherever the file's chunks end."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from trace_scorer.offline import read as inputs
from trace_scorer.offline.read import MAX_DEPTH, ReadError, read_records, split_file


def records(path: Path) -> list[tuple[str, str, object]]:
    return [
        ("error", r.where, r.reason) if isinstance(r, ReadError) else ("record", r.where, r.data)
        for r in read_records(path)
    ]


def sample(index: int) -> dict[str, object]:
    return {
        "id": f"s{index}",
        "response": "It is 18 °C in Tokyo — 東京. " * 20,
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Tokyo", "n": 12345678901234567890123}}],
        "metadata": {"score": 0.25, "ok": True, "none": None, "nested": [[1, [2.5e-3]], {"a": []}]},
    }


def test_a_large_array_is_read_without_holding_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "ARRAY_CHUNK_BYTES", 64 << 10)  # the file stays small for a test
    path = tmp_path / "big.json"
    path.write_text(json.dumps([sample(i) for i in range(4000)], ensure_ascii=False), encoding="utf-8")
    size = path.stat().st_size
    assert size > 8 * inputs.ARRAY_CHUNK_BYTES
    tracemalloc.start()
    try:
        count = sum(1 for record in read_records(path) if not isinstance(record, ReadError))
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 4000
    # read whole, the file's bytes alone are `size`, and its parsed items several times that
    assert peak < size / 4, f"peak {peak:,} bytes reading a {size:,}-byte array"


def test_split_file_does_not_read_an_array(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps([sample(i) for i in range(50)]))
    parts, size = split_file(path, 100)
    assert (len(parts), parts[0].end, size) == (1, None, path.stat().st_size)


@pytest.fixture(params=[1, 2, 3, 7, 64], ids=lambda n: f"chunks of {n}")
def small_chunks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Chunks of a few bytes, so that every value of the documents below is cut somewhere."""
    size: int = request.param
    monkeypatch.setattr(inputs, "_HEAD_BYTES", size, raising=False)
    monkeypatch.setattr(inputs, "ARRAY_CHUNK_BYTES", size, raising=False)
    return size


@pytest.mark.parametrize(
    "document",
    [
        "[]",
        " \n [ ] \n",
        "\ufeff[1, -2.5e-3, true, false, null]",
        '[{"id": "a"}, {"id": "b", "metadata": {"x": [1, {"y": "z"}]}}]',
        json.dumps([sample(i) for i in range(3)], ensure_ascii=False, indent=2),
        json.dumps([sample(i) for i in range(3)]),  # \u escapes of non-ASCII text
        '["\\ud83d\\ude00 a surrogate pair is one character", 12345678901234567890123456789]',
    ],
)
def test_items_read_as_the_whole_document_wherever_chunks_end(
    tmp_path: Path, small_chunks: int, document: str
) -> None:
    path = tmp_path / "a.json"
    path.write_text(document, encoding="utf-8")
    expected = json.loads(document.removeprefix("\ufeff"))
    assert records(path) == [("record", f"item {i}", item) for i, item in enumerate(expected)]


def test_a_bad_item_is_reported_and_the_next_ones_read(tmp_path: Path, small_chunks: int) -> None:
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"id": "a"}, ' + deep.encode() + b', "\\udc80", "\xff", {"x": -Infinity}, {"id": "b"}]')
    got = records(path)
    assert [(kind, where) for kind, where, _ in got] == [
        ("record", "item 0"),
        ("error", "item 1"),
        ("error", "item 2"),
        ("error", "item 3"),
        ("error", "item 4"),
        ("record", "item 5"),
    ]
    assert got[1][2] == f"nested too deeply (more than {MAX_DEPTH} levels)"
    assert got[2][2] == got[3][2] == "not valid UTF-8 text (an invalid byte or a lone surrogate)"
    assert got[4][2] == "invalid JSON: -Infinity is not JSON (no NaN or Infinity)"


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ('{"id": "b" "x": 1}\n]', "invalid JSON: Expecting ',' delimiter"),
        ("{'id': 'b'}\n]", "invalid JSON: Expecting property name enclosed in double quotes"),
        ('{"id": \'b\'}\n]', "invalid JSON: Expecting value"),
        ('{"id": "b"}\n] [', "invalid JSON: Extra data"),
        ('{"id": "b"} {"id": "c"}\n]', "invalid JSON: Expecting ',' delimiter"),
        ('{"id": "b"},\n]', "invalid JSON: Expecting value"),
        ('{"id": "b"', "invalid JSON: Expecting ',' delimiter"),
    ],
)
def test_invalid_json_is_reported_with_its_line_after_the_items_before_it(
    tmp_path: Path, small_chunks: int, tail: str, reason: str
) -> None:
    """The items before the fault are read (they were all lost before); the fault's line is the standard
    library's, as before."""
    text = '[\n{"id": "a"},\n\n' + tail
    path = tmp_path / "a.json"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError) as raised:
        json.loads(text)
    line = raised.value.lineno
    got = records(path)
    assert got[0] == ("record", "item 0", {"id": "a"})
    assert got[-1][:2] == ("error", f"line {line}")
    assert got[-1][2].startswith(reason)


def test_a_number_too_long_ends_the_file_at_its_item(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('[{"id": "a"}, {"id": "b", "metadata": {"n": ' + "9" * 5000 + "}}, {}]")
    got = records(path)
    assert got[0] == ("record", "item 0", {"id": "a"})
    assert got[1][:2] == ("error", "item 1")
    assert "the items after it are not read" in got[1][2]
    assert len(got) == 2

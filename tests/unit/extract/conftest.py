"""Shared helpers for the extraction tests: fixture loading and a row builder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture
def fixture_rows() -> Callable[[str], list[dict[str, Any]]]:
    return load_fixture


@pytest.fixture
def items_by_trace() -> dict[str, dict[str, Any]]:
    return {item["traceId"]: item for item in load_fixture("experiment_items")}


RowMaker = Callable[..., dict[str, Any]]


@pytest.fixture
def make_row() -> RowMaker:
    """A row as the API returns it; ``input``/``output`` are JSON-encoded unless already strings."""
    counter = iter(range(10_000))

    def build(
        ident: str,
        kind: str = "SPAN",
        name: str | None = None,
        *,
        parent: str | None = None,
        input: Any = None,
        output: Any = None,
        at: int | None = None,
        trace: str = "trace-1",
        **extra: Any,
    ) -> dict[str, Any]:
        second = next(counter) if at is None else at
        row: dict[str, Any] = {
            "id": ident,
            "traceId": trace,
            "type": kind,
            "name": name if name is not None else ident,
            "parentObservationId": parent,
            "startTime": f"2026-03-01T10:00:{second:02d}.000Z",
            "endTime": f"2026-03-01T10:00:{second:02d}.500Z",
            "isRootObservation": parent is None,
            "input": input if isinstance(input, str) or input is None else json.dumps(input),
            "output": output if isinstance(output, str) or output is None else json.dumps(output),
            "metadata": {},
            "updatedAt": f"2026-03-01T10:00:{second:02d}.900Z",
        }
        row.update(extra)
        return row

    return build

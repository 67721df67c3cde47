"""Stores on both backends for the semantic suite: ``open_store()`` opens (or reopens) this test's state."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from trace_scorer.state import StateStore
from trace_scorer.state.postgres import PostgresBackend

OpenStore = Callable[[], StateStore]


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenStore]:
    """Opens this test's state (a file, or a schema of its own in the run's database); all closed after."""
    opened: list[StateStore] = []
    if backend == "sqlite":

        def make() -> StateStore:
            return StateStore(tmp_path / "state" / "trace-scorer.db")

    else:
        url: str = request.getfixturevalue("postgres_url")
        schema: str = request.getfixturevalue("postgres_schema")

        def make() -> StateStore:
            return StateStore(PostgresBackend(url, schema))

    def tracked() -> StateStore:
        store = make()
        opened.append(store)
        return store

    yield tracked
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: OpenStore) -> StateStore:
    return open_store()

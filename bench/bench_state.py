"""The state store on SQLite and PostgreSQL: what one call costs, how many statements a batch of traces
costs, and how fast ``trace-scorer state import`` moves a large SQLite state into PostgreSQL.

    PYTHONPATH=. python bench/bench_state.py [--postgres-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--batch 200] [--rounds 200] [--ledger 200000]

A database is created on the server for the run and dropped at its end (the URL's user must be allowed
to). Figures are wall-clock on this machine, printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from trace_scorer.state import StateStore
from trace_scorer.state.postgres import PostgresBackend
from trace_scorer.state.transfer import copy_state

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


class Counting:
    """Counts the statements a store sends its backend (each one a round trip on PostgreSQL)."""

    def __init__(self, store: StateStore) -> None:
        self.count = 0
        backend: Any = store._backend
        for name in ("fetch", "execute", "execute_many"):
            original = getattr(backend, name)

            def counted(*args: Any, _original: Callable[..., Any] = original) -> Any:
                self.count += 1
                return _original(*args)

            setattr(backend, name, counted)


def _timings(action: Callable[[int], object], rounds: int) -> tuple[float, float]:
    """Median and 95th percentile of ``action(i)`` in milliseconds."""
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        action(i)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def _batch(store: StateStore, batch: int, i: int) -> None:
    """What the worker asks of the state for one batch of traces: lookups, then one transaction."""
    subjects = [f"trace-{i}-{n}" for n in range(batch)]
    store.scored_hashes("agent", subjects)
    store.failed_subjects("agent", subjects)
    with store.transaction():
        store.record_failure("agent", subjects[0], "judge down", T0 + timedelta(minutes=5))
        store.record_scored("agent", subjects[1:], "hash-a", T0)
        store.set_watermark("agent", T0 + timedelta(seconds=i))


def measure(name: str, store: StateStore, batch: int, rounds: int) -> None:
    counter = Counting(store)
    before = counter.count
    _batch(store, batch, -1)
    statements = counter.count - before
    rows = [
        ("watermark()", _timings(lambda i: store.watermark("agent"), rounds)),
        (
            f"scored_hashes({batch})",
            _timings(lambda i: store.scored_hashes("agent", [f"trace-{i}-{n}" for n in range(batch)]), rounds),
        ),
        ("record_failure()", _timings(lambda i: store.record_failure("agent", f"f{i % 10}", "x", T0), rounds)),
        ("see_run()", _timings(lambda i: store.see_run("bench", f"run-{i % 10}", i, T0), rounds)),
        (f"a batch of {batch} traces", _timings(lambda i: _batch(store, batch, i), rounds)),
    ]
    print(f"\n{name}: {statements} statements per batch of {batch} traces")
    for label, (median, p95) in rows:
        print(f"  {label:<28} median {median:7.2f} ms   p95 {p95:7.2f} ms")


def measure_import(sqlite_file: Path, target: StateStore, ledger: int) -> None:
    source = StateStore(sqlite_file)
    subjects = [f"trace-{n:08d}" for n in range(ledger)]
    for start in range(0, ledger, 10_000):
        source.record_scored("agent", subjects[start : start + 10_000], "hash-a", T0)
    started = time.perf_counter()
    counts = copy_state(source, target)
    seconds = time.perf_counter() - started
    total = sum(counts.values())
    size = sqlite_file.stat().st_size / 1e6
    print(
        f"\nstate import: {total} rows ({size:.0f} MB SQLite file) in {seconds:.1f} s = {total / seconds:,.0f} rows/s"
    )
    source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--batch", type=int, default=200, help="traces per batch (the worker's batch_size)")
    parser.add_argument("--rounds", type=int, default=200, help="calls timed per operation")
    parser.add_argument("--ledger", type=int, default=200_000, help="ledger rows of the imported SQLite state")
    args = parser.parse_args()

    database = f"bench_state_{secrets.token_hex(4)}"
    with psycopg.connect(args.postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        try:
            url = urlunsplit(urlsplit(args.postgres_url)._replace(path=f"/{database}"))
            with tempfile.TemporaryDirectory() as folder:
                sqlite = StateStore(Path(folder) / "bench.db")
                measure("SQLite", sqlite, args.batch, args.rounds)
                sqlite.close()
                postgres = StateStore(PostgresBackend(url, "bench"))
                measure("PostgreSQL (loopback)", postgres, args.batch, args.rounds)
                postgres.close()
                measure_import(Path(folder) / "import.db", StateStore(PostgresBackend(url, "imported")), args.ledger)
        finally:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


if __name__ == "__main__":
    main()

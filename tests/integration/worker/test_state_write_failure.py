"""A state that stops taking writes under a running worker (issue #22 item 5): the disk under the SQLite
file fills up after the scores were posted. The worker must not post the same window again every tick,
must say why in ``/readyz``, and must record what it posted once the disk has room again.

The full disk is injected with SQLite's own ``PRAGMA max_page_count`` set to the file's size: a write
that needs one more page then fails exactly as on a full disk (``SQLITE_FULL``, "database or disk is
full"), as any user would see it, and without root, a mount or a making a directory read-only (which
root ignores)."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import structlog

from tests.support.clocks import FakeClock
from tests.support.langfuse_inprocess import InProcessLangfuse
from tests.support.worker import MakeHarness, agent_trace
from trace_scorer.state import StateError, StateStore
from trace_scorer.state.sqlite import SqliteBackend
from trace_scorer.worker.service import Context, Worker

TRACES = 150  # their ledger rows need pages the file does not have
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _sqlite(context: Context) -> sqlite3.Connection:
    backend = context.state._backend
    assert isinstance(backend, SqliteBackend)
    return backend._db


def fill_disk(context: Context) -> None:
    """From now on no write that needs another page of the file succeeds."""
    db = _sqlite(context)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


def free_disk(context: Context) -> None:
    _sqlite(context).execute("PRAGMA max_page_count = 1073741823")


def posted_ids(lf: InProcessLangfuse) -> list[str]:
    """The id of every score posted, once per time it was posted (v4: ``POST /scores``)."""
    return [str(score["id"]) for body in lf.score_posts for score in body]


async def test_a_full_disk_after_posting_stops_the_target_without_posting_again(
    harness: MakeHarness, v4: InProcessLangfuse, clock: FakeClock
) -> None:
    start = clock.now() - timedelta(minutes=30)
    for index in range(TRACES):
        v4.add_rows(*agent_trace(f"t{index:03d}", start + timedelta(seconds=index)))
    h = await harness()
    context = await h.open()
    health = context.ops.health
    worker = Worker(context, clock=clock.now)
    source = context.sources["agent"]
    fill_disk(context)

    with structlog.testing.capture_logs() as logs:
        await worker.tick(source)
        posted = posted_ids(v4)
        assert posted and set(posted) == set(v4.scores)  # Langfuse has the scores; the ledger could not take them
        ready = health.readiness()
        assert not ready.ok
        assert "disk is full" in ready.reason and str(h.settings.state.path) in ready.reason, ready.reason

        for _ in range(3):  # later ticks: the write is tried again, nothing is posted again
            clock.elapsed += 60
            await worker.tick(source)
        assert posted_ids(v4) == posted
        assert not health.readiness().ok

    assert not [e for e in logs if e["event"] == "tick_error"]  # a clear error, no traceback
    failed = [e for e in logs if e["event"] == "state_write_failed"]
    assert len(failed) == 4 and "free space on the file system" in failed[0]["reason"]

    free_disk(context)
    clock.elapsed += 60
    await worker.tick(source)
    assert health.readiness().ok, health.readiness().reason
    scored = context.state.scored_hashes("agent", [f"t{i:03d}" for i in range(TRACES)])
    assert len(scored) == TRACES  # what was posted is in the ledger now: nothing lost
    again = posted_ids(v4)
    assert len(again) == len(set(again))  # no score posted twice: the rest of the window went out once
    assert context.state.watermark("agent") is not None


def test_a_full_disk_at_work_is_a_state_error_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = StateStore(path)
    backend = store._backend
    assert isinstance(backend, SqliteBackend)
    backend._db.execute(f"PRAGMA max_page_count = {backend._db.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(StateError) as raised:
        store.record_scored("agent", [f"t{i:05d}-{'x' * 200}" for i in range(200)], "hash", T0)
    assert str(path) in str(raised.value) and "free space on the file system" in str(raised.value)
    store.close()


def test_the_state_and_its_files_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    previous = os.umask(0o022)  # the usual umask, under which SQLite's own default is 0644
    try:
        path = tmp_path / "state.db"
        store = StateStore(path)
        store.set_watermark("agent", T0)  # the -wal and -shm files exist once written
        modes = {
            p.name: oct(p.stat().st_mode & 0o777)
            for p in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", ".lock")))
        }
        store.close()
    finally:
        os.umask(previous)
    assert modes == {name: "0o600" for name in ("state.db", "state.db-wal", "state.db-shm", "state.db.lock")}

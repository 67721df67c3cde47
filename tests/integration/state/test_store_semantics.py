"""What the state remembers, the same on SQLite and PostgreSQL: one suite, run on both backends."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.integration.state.conftest import OpenStore
from trace_scorer.state import TABLES, Failure, StateStore, StoredResult

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def test_watermark_and_ledger_survive_reopen(open_store: OpenStore) -> None:
    store = open_store()
    assert store.watermark("agent") is None
    with store.transaction():
        store.record_scored("agent", ["t1", "t2"], "hash-a", T0)
        store.set_watermark("agent", T0)
    store.close()

    reopened = open_store()
    assert reopened.watermark("agent") == T0
    assert reopened.scored_hashes("agent", ["t1", "t2", "t3"]) == {"t1": "hash-a", "t2": "hash-a"}
    assert reopened.scored_hashes("other-target", ["t1"]) == {}


def test_times_come_back_in_utc_whatever_zone_they_were_given_in(store: StateStore) -> None:
    berlin = T0.astimezone(datetime.fromisoformat("2026-10-01T00:00:00+02:00").tzinfo)
    store.set_watermark("agent", berlin + timedelta(microseconds=250))
    back = store.watermark("agent")
    assert back == T0 + timedelta(microseconds=250) and back is not None and back.utcoffset() == timedelta(0)


def test_transaction_rolls_back_everything(store: StateStore) -> None:
    store.set_watermark("agent", T0)
    with pytest.raises(RuntimeError), store.transaction():
        store.record_scored("agent", ["t1"], "h", T0)
        store.record_failure("agent", "t2", "boom", T0)
        store.set_watermark("agent", T0 + timedelta(hours=1))
        raise RuntimeError("posting failed")
    assert store.watermark("agent") == T0
    assert store.scored_hashes("agent", ["t1"]) == {} and store.failure("agent", "t2") is None


def test_nested_transactions_join_the_outer_one(store: StateStore) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        with store.transaction():
            store.set_watermark("agent", T0)
        assert store.watermark("agent") == T0  # visible inside the outer transaction
        raise RuntimeError("later failure")
    assert store.watermark("agent") is None  # the inner block did not commit on its own


def test_configuration_change_is_visible_in_the_ledger(store: StateStore) -> None:
    store.record_scored("agent", ["t1"], "old", T0)
    store.record_scored("agent", ["t1"], "new", T0 + timedelta(minutes=1))
    assert store.scored_hashes("agent", ["t1"]) == {"t1": "new"}


def test_done_without_scores_keeps_its_reason_until_scored(store: StateStore) -> None:
    store.record_scored("agent", ["big"], "h", T0, reason="too many observations")
    assert store.done_reason("agent", "big") == "too many observations"
    assert store.scored_hashes("agent", ["big"]) == {"big": "h"}
    store.record_scored("agent", ["big"], "h2", T0)
    assert store.done_reason("agent", "big") is None and store.done_reason("agent", "never") is None


def test_failures_count_tries_become_due_and_clear_when_scored(store: StateStore) -> None:
    assert store.record_failure("agent", "t9", "all judges down", T0 + timedelta(minutes=5), '{"id": "t9"}') == 1
    assert store.record_failure("agent", "t9", "still down", T0 + timedelta(minutes=10)) == 2
    assert store.due_failures("agent", T0 + timedelta(minutes=9)) == []
    due = store.due_failures("agent", T0 + timedelta(minutes=10))
    # The payload of the first try is kept when a later try gives none.
    assert due == [Failure("t9", 2, T0 + timedelta(minutes=10), "still down", '{"id": "t9"}')]
    assert store.failed_subjects("agent", ["t9", "t8"]) == {"t9"}
    store.record_scored("agent", ["t9"], "h", T0)
    assert store.failure("agent", "t9") is None and store.failed_subjects("agent", ["t9"]) == set()


def test_due_failures_come_oldest_first_up_to_the_limit(store: StateStore) -> None:
    for minutes, subject in [(3, "c"), (1, "a"), (2, "b"), (9, "later")]:
        store.record_failure("agent", subject, "x", T0 + timedelta(minutes=minutes))
    store.record_failure("other", "z", "x", T0)
    due = store.due_failures("agent", T0 + timedelta(minutes=5), limit=2)
    assert [f.subject for f in due] == ["a", "b"]


def test_given_up_failures_are_never_due(store: StateStore) -> None:
    store.record_failure("agent", "t1", "boom", None)
    assert store.due_failures("agent", T0 + timedelta(days=365)) == []
    failure = store.failure("agent", "t1")
    assert failure is not None and failure.next_try is None and failure.last_error == "boom"


def test_run_first_seen_is_kept_and_last_change_moves_with_the_count(store: StateStore) -> None:
    first = store.see_run("bench", "exp-1", 10, T0)
    same = store.see_run("bench", "exp-1", 10, T0 + timedelta(minutes=3))
    more = store.see_run("bench", "exp-1", 12, T0 + timedelta(minutes=6))
    assert first.first_seen == same.first_seen == more.first_seen == T0
    assert same.last_change == T0
    assert more.last_change == T0 + timedelta(minutes=6) and more.item_count == 12
    store.set_run_posted("bench", "exp-1", "items12-hashA")
    state = store.run("bench", "exp-1")
    assert state is not None and state.posted_hash == "items12-hashA" and state.first_seen == T0
    assert store.run("bench", "exp-2") is None


def test_runs_changed_since(store: StateStore) -> None:
    store.see_run("bench", "old", 5, T0)
    store.see_run("bench", "new", 5, T0 + timedelta(hours=2))
    store.see_run("other", "x", 5, T0 + timedelta(hours=2))
    assert store.runs_changed_since("bench", T0 + timedelta(hours=1)) == ["new"]
    assert store.runs_changed_since("bench", T0) == ["new", "old"]


def test_run_results_are_replaced_per_trace(store: StateStore) -> None:
    store.save_results("bench", "exp-1", [StoredResult("t2", "i2", '{"a": 1}'), StoredResult("t1", None, "{}")])
    store.save_results("bench", "exp-1", [StoredResult("t2", "i2b", '{"a": 0.5}')])
    store.save_results("bench", "exp-2", [StoredResult("t9", "i9", "{}")])
    assert store.run_results("bench", "exp-1") == [
        StoredResult("t1", None, "{}"),
        StoredResult("t2", "i2b", '{"a": 0.5}'),
    ]


def test_many_subjects_in_one_lookup(store: StateStore) -> None:
    subjects = [f"t{i}" for i in range(1500)]
    store.record_scored("agent", subjects, "h", T0)
    store.record_failure("agent", "t1499", "x", None)
    assert len(store.scored_hashes("agent", subjects)) == 1500
    assert store.failed_subjects("agent", subjects) == {"t1499"}  # found in the last chunk of the lookup


def test_naive_times_are_refused(store: StateStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        store.set_watermark("agent", datetime(2026, 1, 1))


def test_the_copied_columns_are_every_column_of_the_current_schema(
    store: StateStore, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``state import`` copies :data:`TABLES`: a migration that adds a column must add it there too."""
    if backend == "sqlite":
        db = sqlite3.connect(tmp_path / "state" / "trace-scorer.db")
        columns = {t.name: tuple(r[1] for r in db.execute(f"PRAGMA table_info({t.name})")) for t in TABLES}
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        db.close()
    else:
        url, schema = request.getfixturevalue("postgres_url"), request.getfixturevalue("postgres_schema")
        with psycopg.connect(url) as pg:
            columns = {
                t.name: tuple(
                    r[0]
                    for r in pg.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                        "AND table_name = %s ORDER BY ordinal_position",
                        (schema, t.name),
                    )
                )
                for t in TABLES
            }
            names = {r[0] for r in pg.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}
    assert columns == {t.name: t.columns for t in TABLES}
    if backend == "sqlite":  # every table of the file is state (PostgreSQL may also hold a job queue's)
        assert names == {t.name for t in TABLES}
    else:
        assert {t.name for t in TABLES} | {"schema_version"} <= names

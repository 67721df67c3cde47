"""The worker's SQLite state: survives reopening, writes land together or not at all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from trace_scorer.state import StateStore

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def test_watermark_and_ledger_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / "trace-scorer.db"
    store = StateStore(path)
    assert store.watermark("agent") is None
    with store.transaction():
        store.record_scored("agent", ["t1", "t2"], "hash-a", T0)
        store.set_watermark("agent", T0)
    store.close()

    reopened = StateStore(path)
    assert reopened.watermark("agent") == T0
    assert reopened.scored_hashes("agent", ["t1", "t2", "t3"]) == {"t1": "hash-a", "t2": "hash-a"}
    assert reopened.scored_hashes("other-target", ["t1"]) == {}


def test_transaction_rolls_back_everything(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.set_watermark("agent", T0)
    with pytest.raises(RuntimeError), store.transaction():
        store.record_scored("agent", ["t1"], "h", T0)
        store.set_watermark("agent", T0 + timedelta(hours=1))
        raise RuntimeError("posting failed")
    assert store.watermark("agent") == T0
    assert store.scored_hashes("agent", ["t1"]) == {}


def test_configuration_change_is_visible_in_the_ledger(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.record_scored("agent", ["t1"], "old", T0)
    store.record_scored("agent", ["t1"], "new", T0 + timedelta(minutes=1))
    assert store.scored_hashes("agent", ["t1"]) == {"t1": "new"}


def test_failures_count_tries_become_due_and_clear_when_scored(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    assert store.record_failure("agent", "t9", "all judges down", T0 + timedelta(minutes=5)) == 1
    assert store.record_failure("agent", "t9", "all judges down", T0 + timedelta(minutes=10)) == 2
    assert store.due_failures("agent", T0 + timedelta(minutes=9)) == []
    due = store.due_failures("agent", T0 + timedelta(minutes=10))
    assert [(f.subject, f.tries) for f in due] == [("t9", 2)]
    store.record_scored("agent", ["t9"], "h", T0)
    assert store.failure("agent", "t9") is None


def test_given_up_failures_are_never_due(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    store.record_failure("agent", "t1", "boom", None)
    assert store.due_failures("agent", T0 + timedelta(days=365)) == []
    failure = store.failure("agent", "t1")
    assert failure is not None and failure.next_try is None and failure.last_error == "boom"


def test_run_first_seen_is_kept_and_last_change_moves_with_the_count(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    first = store.see_run("bench", "exp-1", 10, T0)
    same = store.see_run("bench", "exp-1", 10, T0 + timedelta(minutes=3))
    more = store.see_run("bench", "exp-1", 12, T0 + timedelta(minutes=6))
    assert first.first_seen == same.first_seen == more.first_seen == T0
    assert same.last_change == T0
    assert more.last_change == T0 + timedelta(minutes=6) and more.item_count == 12
    store.set_run_posted("bench", "exp-1", "items12-hashA")
    state = store.run("bench", "exp-1")
    assert state is not None and state.posted_hash == "items12-hashA"


def test_many_subjects_in_one_lookup(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    subjects = [f"t{i}" for i in range(1500)]
    store.record_scored("agent", subjects, "h", T0)
    assert len(store.scored_hashes("agent", subjects)) == 1500


def test_naive_times_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        StateStore(tmp_path / "s.db").set_watermark("agent", datetime(2026, 1, 1))

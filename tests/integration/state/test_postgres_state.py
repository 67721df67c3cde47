"""The PostgreSQL state as several replicas use it: concurrent writers, replicas starting together, schema
versions, a dropped connection, and every way the URL can be wrong — each refused naming ``[state] url``
and never showing the password."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from tests.support.postgres import password_refusing_server
from trace_scorer.state import MIGRATIONS, SCHEMA_VERSION, StateError, StateStore
from trace_scorer.state.postgres import PostgresBackend

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def _admin(url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(url, autocommit=True)


# -- several processes on one state ------------------------------------------------------------------------

_REPLICA = """
import json, sys
from datetime import UTC, datetime, timedelta
from trace_scorer.state import StateStore
from trace_scorer.state.postgres import PostgresBackend

url, schema, index, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = StateStore(PostgresBackend(url, schema))
print(json.dumps({"ready": store.found_version}), flush=True)
sys.stdin.readline()  # "go": every replica starts writing at once
t0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
tries, first_seen = [], []
for n in range(rounds):
    now = t0 + timedelta(seconds=index * 1000 + n)
    tries.append(store.record_failure("agent", "shared-trace", f"replica {index}", now + timedelta(minutes=5)))
    first_seen.append(store.see_run("bench", "exp-1", 10 + n % 3, now).first_seen.isoformat())
    store.record_scored("agent", [f"r{index}-{n}", "shared-scored"], f"hash-{index}", now)
store.close()
print(json.dumps({"tries": tries, "first_seen": sorted(set(first_seen))}), flush=True)
"""


def _start_replicas(url: str, schema: str, count: int, rounds: int) -> list[subprocess.Popen[str]]:
    replicas = [
        subprocess.Popen(
            [sys.executable, "-c", _REPLICA, url, schema, str(index), str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    return replicas


def _say(replica: subprocess.Popen[str], line: str) -> None:
    assert replica.stdin is not None
    replica.stdin.write(line)
    replica.stdin.flush()


def _hear(replica: subprocess.Popen[str]) -> dict[str, object]:
    assert replica.stdout is not None
    line = replica.stdout.readline()
    assert line, f"replica exited with {replica.wait()}"
    result: dict[str, object] = json.loads(line)
    return result


@pytest.fixture
def replicas() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for replica in started:
        if replica.poll() is None:
            replica.kill()
        replica.wait()


def test_replicas_writing_at_once_lose_no_try_and_keep_the_first_seen_time(
    postgres_url: str, postgres_schema: str, replicas: list[subprocess.Popen[str]]
) -> None:
    count, rounds = 4, 40
    replicas += _start_replicas(postgres_url, postgres_schema, count, rounds)
    found = [_hear(r)["ready"] for r in replicas]  # all four started together: one migrated, the others waited
    assert sorted(found) == [0] + [SCHEMA_VERSION] * (count - 1)  # type: ignore[type-var]
    for replica in replicas:
        _say(replica, "go\n")
    results = [_hear(r) for r in replicas]
    assert [r.wait() for r in replicas] == [0] * count

    every_try = sorted(t for r in results for t in r["tries"])  # type: ignore[attr-defined]
    assert every_try == list(range(1, count * rounds + 1))  # each increment seen once: none lost, none twice
    store = StateStore(PostgresBackend(postgres_url, postgres_schema))
    failure = store.failure("agent", "shared-trace")
    assert failure is not None and failure.tries == count * rounds
    run = store.run("bench", "exp-1")
    assert run is not None
    seen = {s for r in results for s in r["first_seen"]}  # type: ignore[attr-defined]
    assert seen == {run.first_seen.isoformat()}  # every replica saw the one first-seen time, kept from the start
    ledger = store.scored_hashes("agent", [f"r{i}-{n}" for i in range(count) for n in range(rounds)])
    assert len(ledger) == count * rounds
    store.close()


def test_a_group_of_writes_is_run_again_after_a_deadlock(postgres_url: str, postgres_schema: str) -> None:
    """Two replicas' transactions lock two rows in opposite orders: PostgreSQL breaks the deadlock by rolling
    one back, and run_in_transaction runs that one again; both land, the one run again last."""
    first = StateStore(PostgresBackend(postgres_url, postgres_schema))
    second = StateStore(PostgresBackend(postgres_url, postgres_schema))
    first.set_watermark("a", T0)
    first.set_watermark("b", T0)
    both_hold_one = threading.Barrier(2)
    runs: list[str] = []

    def replica(store: StateStore, mine: str, theirs: str, value: datetime) -> None:
        def work() -> None:
            runs.append(mine)
            store.set_watermark(mine, value)
            if runs.count(mine) == 1:  # the first run of each waits until the other holds its row too
                both_hold_one.wait(timeout=60)
            store.set_watermark(theirs, value)

        store.run_in_transaction(work)

    threads = [
        threading.Thread(target=replica, args=(first, "a", "b", T0 + timedelta(hours=1))),
        threading.Thread(target=replica, args=(second, "b", "a", T0 + timedelta(hours=2))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(runs) in (["a", "a", "b"], ["a", "b", "b"])  # exactly one of them was run again
    rerun = "a" if runs.count("a") == 2 else "b"
    assert first.watermark("a") == first.watermark("b") == T0 + timedelta(hours=1 if rerun == "a" else 2)
    first.close()
    second.close()


def test_a_dropped_connection_fails_the_call_in_hand_and_the_next_one_reconnects(
    postgres_url: str, postgres_schema: str
) -> None:
    store = StateStore(PostgresBackend(postgres_url, postgres_schema))
    store.set_watermark("agent", T0)
    with _admin(postgres_url) as admin:  # as a server restart or a fail-over would
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'trace-scorer' "
            "AND datname = current_database()"
        )
    with pytest.raises(psycopg.OperationalError):
        store.watermark("agent")
    assert store.watermark("agent") == T0
    store.close()


# -- schema versions ---------------------------------------------------------------------------------------


def _create_schema_at(url: str, schema: str, version: int) -> None:
    with _admin(url) as db, db.transaction():
        db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        db.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        db.execute("CREATE TABLE schema_version (one BOOLEAN PRIMARY KEY DEFAULT TRUE, version INTEGER NOT NULL)")
        db.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        for step in MIGRATIONS[: min(version, SCHEMA_VERSION)]:
            db.execute(step.postgres)


def test_a_state_of_an_older_schema_is_migrated_and_keeps_its_rows(postgres_url: str, postgres_schema: str) -> None:
    _create_schema_at(postgres_url, postgres_schema, 1)
    with _admin(postgres_url) as db:
        db.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(postgres_schema)))
        db.execute("INSERT INTO ledger VALUES ('agent', 't1', 'hash-a', %s)", (T0,))
        db.execute("INSERT INTO watermarks VALUES ('agent', %s)", (T0,))
    store = StateStore(PostgresBackend(postgres_url, postgres_schema))
    assert (store.found_version, store.schema_version) == (1, SCHEMA_VERSION)
    assert store.scored_hashes("agent", ["t1"]) == {"t1": "hash-a"} and store.watermark("agent") == T0
    assert store.done_reason("agent", "t1") is None
    store.record_scored("agent", ["big"], "hash-a", T0, reason="too many observations")
    assert store.done_reason("agent", "big") == "too many observations"
    store.close()
    again = StateStore(PostgresBackend(postgres_url, postgres_schema))
    assert again.found_version == SCHEMA_VERSION
    again.close()


def test_a_state_from_a_newer_release_is_refused(postgres_url: str, postgres_schema: str) -> None:
    _create_schema_at(postgres_url, postgres_schema, SCHEMA_VERSION + 1)
    with pytest.raises(StateError, match=f"has schema version {SCHEMA_VERSION + 1}, newer than") as refused:
        PostgresBackend(postgres_url, postgres_schema)
    assert f"(schema {postgres_schema})" in str(refused.value) and "[state] db_schema" in str(refused.value)


def test_tables_of_another_application_in_the_schema_are_refused(postgres_url: str, postgres_schema: str) -> None:
    with _admin(postgres_url) as db:
        db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(postgres_schema)))
        db.execute(sql.SQL("CREATE TABLE {}.ledger (id INTEGER)").format(sql.Identifier(postgres_schema)))
    with pytest.raises(StateError, match="already has tables named ledger that trace-scorer did not create"):
        PostgresBackend(postgres_url, postgres_schema)


def test_a_dry_run_changes_nothing(postgres_url: str, postgres_schema: str) -> None:
    backend = PostgresBackend(postgres_url, postgres_schema, dry_run=True)
    assert (backend.found_version, backend.schema_version) == (0, 0)
    backend.close()
    with _admin(postgres_url) as db:
        schemas = db.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (postgres_schema,)).fetchall()
    assert schemas == []


# -- a state that cannot be used ---------------------------------------------------------------------------


@contextmanager
def socket_closed_port() -> Iterator[int]:
    """A loopback port bound but not listening: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _refusal(url: str, schema: str = "trace_scorer") -> str:
    with pytest.raises(StateError) as refused:
        PostgresBackend(url, schema)
    return str(refused.value)


def test_a_refused_password_is_reported_without_it() -> None:
    with password_refusing_server() as server:
        url = server.url.replace("scorer@", "scorer:pa55-w0rd@")
        message = _refusal(url)
    assert server.passwords == ["pa55-w0rd"]  # it was sent, and refused
    assert 'password authentication failed for user "scorer"' in message
    assert f"[state] url = {server.url}" in message and "pa55-w0rd" not in message


def test_an_unreachable_server_is_reported_naming_the_url(postgres_url: str) -> None:
    with socket_closed_port() as port:
        url = f"postgresql://scorer:pa55-w0rd@127.0.0.1:{port}/scoring"
        message = _refusal(url)
    assert message.startswith(
        f"cannot connect to the PostgreSQL state at [state] url = postgresql://scorer@127.0.0.1:{port}/"
    )
    assert "Connection refused" in message and "pa55-w0rd" not in message


def test_a_missing_database_is_reported_naming_it(postgres_url: str) -> None:
    url = postgres_url.rsplit("/", 1)[0].replace("://postgres@", "://postgres:pa55-w0rd@") + "/no_such_db"
    message = _refusal(url)
    assert 'database "no_such_db" does not exist' in message and "[state] url" in message
    assert "pa55-w0rd" not in message


def test_a_read_only_server_is_refused_at_start_not_mid_tick(postgres_url: str, postgres_schema: str) -> None:
    StateStore(PostgresBackend(postgres_url, postgres_schema)).close()  # the state exists and is current
    read_only = postgres_url + "?options=-c%20default_transaction_read_only%3Don"
    message = _refusal(read_only, postgres_schema)
    assert "is read-only" in message and "primary (read-write) server" in message


def test_a_user_without_create_rights_is_told_what_to_grant(postgres_url: str, postgres_schema: str) -> None:
    role = f"{postgres_schema}_ro"
    with _admin(postgres_url) as db:
        db.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))  # no CREATE on the database
    try:
        message = _refusal(postgres_url.replace("://postgres@", f"://{role}@"), postgres_schema)
        assert "cannot create or write the state's tables" in message and "grant it CREATE" in message
    finally:
        with _admin(postgres_url) as db:
            db.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))

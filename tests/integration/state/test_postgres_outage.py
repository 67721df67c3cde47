"""The PostgreSQL state through a database outage (issue #22 item 4), on a proxy the test cuts or freezes
(:mod:`tests.support.pg_proxy`): the machine's server keeps running for everyone else.

A frozen server (SIGSTOP, a network dropping packets) answered nothing and the state's synchronous call
waited for ever, on the worker's event loop: ``/healthz`` and ``/readyz`` stopped answering. A call now
fails after its deadline with a :class:`StateError` saying so, and the next one, once the server is back,
reconnects."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.support.pg_proxy import pg_proxy
from trace_scorer.state import StateError, StateStore
from trace_scorer.state.postgres import PostgresBackend

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
#: The test's deadline for one call: short, but far above a loopback call even on a busy machine.
DEADLINE = 2.0


def outcome_of(call: Callable[[], Any]) -> BaseException | Any:
    """``call()`` in a thread: its result or exception. A call still waiting after two minutes fails the test
    (the old store waited for ever on a frozen server) instead of hanging the suite."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    assert box, "the state call is still waiting on the frozen server"
    return box[0]


def test_a_call_to_a_frozen_server_fails_after_its_deadline_and_the_next_one_reconnects(
    postgres_url: str, postgres_schema: str
) -> None:
    with pg_proxy(postgres_url) as (proxy, url):
        store = StateStore(PostgresBackend(url, postgres_schema, deadline=DEADLINE))
        store.set_watermark("agent", T0)
        proxy.freeze()
        failed = outcome_of(lambda: store.watermark("agent"))
        assert isinstance(failed, StateError), failed
        assert f"did not answer within {DEADLINE:g} s" in str(failed) and "127.0.0.1" in str(failed)
        written = outcome_of(lambda: store.set_watermark("agent", T0))  # a write (a transaction) too
        assert isinstance(written, StateError), written

        proxy.restore()
        before = proxy.accepted
        assert store.watermark("agent") == T0
        assert proxy.accepted > before  # a new connection: the cut one was not used again
        store.close()


def test_a_server_going_away_fails_the_call_in_hand_and_the_next_one_reconnects(
    postgres_url: str, postgres_schema: str
) -> None:
    with pg_proxy(postgres_url) as (proxy, url):
        store = StateStore(PostgresBackend(url, postgres_schema, deadline=DEADLINE))
        store.set_watermark("agent", T0)
        proxy.cut()  # a restart: connections closed, new ones refused
        with pytest.raises(psycopg.OperationalError):
            store.watermark("agent")
        with pytest.raises(StateError, match="cannot connect to the PostgreSQL state"):
            store.watermark("agent")
        proxy.restore()
        assert store.watermark("agent") == T0
        store.close()


def test_state_connections_use_tcp_keepalives_unless_the_url_says_otherwise(
    postgres_url: str, postgres_schema: str
) -> None:
    store = StateStore(PostgresBackend(f"{postgres_url}?keepalives_idle=7", postgres_schema))
    backend = store._backend
    assert isinstance(backend, PostgresBackend)
    params = backend._conn.info.get_parameters()
    dsn = psycopg.conninfo.conninfo_to_dict(backend._conn.info.dsn)
    assert dsn["keepalives"] == "1" and dsn["keepalives_idle"] == "7" and dsn["tcp_user_timeout"] == "30000"
    assert params["application_name"] == "trace-scorer"
    store.close()

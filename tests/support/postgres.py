"""PostgreSQL for the tests: a database of this test run's own, a schema per test, and a server that
refuses every password.

The server is the one on 127.0.0.1:5432 (user postgres, trust auth), or ``TRACE_SCORER_TEST_POSTGRES_URL``
(an admin URL: it must be allowed to create databases). The session creates a uniquely named database and
drops it at the end; each test that asks for one gets a fresh schema in it (dropped after the test), which
is faster than a database per test and keeps tests independent.

Unreachable server: in CI (``CI`` set, as ``.ci/run`` does) every PostgreSQL test **fails** with the reason,
since CI has the server and a skip would hide a broken set-up; on a developer's machine without the
server they are skipped with the reason.
"""

from __future__ import annotations

import os
import secrets
import socketserver
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

ADMIN_URL = os.environ.get("TRACE_SCORER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def database_url(admin_url: str, database: str) -> str:
    return urlunsplit(urlsplit(admin_url)._replace(path=f"/{database}"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a database created for this test run (dropped at its end)."""
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        message = (
            f"PostgreSQL for the state tests is not reachable at {ADMIN_URL} ({' '.join(str(exc).split())}); "
            "start it, or set TRACE_SCORER_TEST_POSTGRES_URL to a server where this user may create databases"
        )
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    name = f"trace_scorer_test_{os.getpid()}_{secrets.token_hex(4)}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield database_url(ADMIN_URL, name)
        finally:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def postgres_schema(postgres_url: str) -> Iterator[str]:
    """A schema name of this test's own in the run's database (dropped after the test, if created)."""
    name = f"t_{secrets.token_hex(6)}"
    yield name
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@dataclass
class PasswordRefusingServer:
    """What the server saw: the passwords clients sent."""

    url: str
    passwords: list[str] = field(default_factory=list)


def _read(sock: socketserver.BaseRequestHandler, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.request.recv(count - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


@contextmanager
def password_refusing_server(user: str = "scorer") -> Iterator[PasswordRefusingServer]:
    """A loopback server speaking enough of the PostgreSQL protocol to ask for a password and refuse it
    (SQLSTATE 28P01), as a server with password authentication does: the trust-auth test server cannot
    refuse one. Yields the URL to connect to (no password in it) and the passwords received."""
    seen = PasswordRefusingServer(url="")

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                while True:  # SSL / GSS encryption requests first (refused with "N"), then the start-up packet
                    length, code = struct.unpack("!ii", _read(self, 8))
                    _read(self, length - 8)
                    if code in (80877103, 80877104):
                        self.request.sendall(b"N")
                        continue
                    break
                self.request.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
                kind, length = struct.unpack("!ci", _read(self, 5))
                assert kind == b"p"
                seen.passwords.append(_read(self, length - 4).rstrip(b"\0").decode())
                fields = (
                    b"SFATAL\0VFATAL\0C28P01\0"
                    + f'Mpassword authentication failed for user "{user}"\0'.encode()
                    + b"\0"
                )
                self.request.sendall(b"E" + struct.pack("!i", len(fields) + 4) + fields)
            except ConnectionError:
                pass

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        seen.url = f"postgresql://{user}@127.0.0.1:{server.server_address[1]}/scoring"
        try:
            yield seen
        finally:
            server.shutdown()

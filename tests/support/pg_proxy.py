"""A loopback TCP proxy in front of the tests' PostgreSQL that a test can cut or freeze: a database outage
for one test, without stopping (or SIGSTOPping) the server every other test and engineer uses.

- :meth:`PgProxy.cut`: every connection closed and new ones refused, as while the server restarts.
- :meth:`PgProxy.freeze`: connections stay open and new ones are accepted, but no byte goes through in
  either direction, as with a frozen server (SIGSTOP) or a network dropping packets: the kernel still
  acknowledges, so neither the client's TCP keepalives nor the server's timeouts notice.
- :meth:`PgProxy.restore`: back to forwarding (and accepting) as before.

One thread runs the proxy (a ``selectors`` loop), so a test's synchronous database calls on its event
loop cannot deadlock with it.
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit


class PgProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream`` until told otherwise."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._peers: dict[socket.socket, socket.socket] = {}
        self._frozen = False
        self._running = True
        self._listener: socket.socket | None = None
        self.port = self._listen(0)
        #: Connections accepted so far (a reconnecting client shows here).
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, name="pg-proxy", daemon=True)
        self._thread.start()

    def url(self, url: str) -> str:
        """``url`` pointing at the proxy instead of the server."""
        parts = urlsplit(url)
        user = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=f"{user + '@' if user else ''}127.0.0.1:{self.port}"))

    # -- what a test does ------------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every connection; refuse new ones until :meth:`restore`."""
        with self._lock:
            if self._listener is not None:
                self._selector.unregister(self._listener)
                self._listener.close()
                self._listener = None
            for sock in list(self._peers):
                self._drop(sock)
        self._wake()

    def freeze(self) -> None:
        """Hold every byte (both ways), accept new connections and hold them too, until :meth:`restore`."""
        with self._lock:
            if not self._frozen:
                self._frozen = True
                for sock in self._peers:
                    self._selector.unregister(sock)
        self._wake()

    def restore(self) -> None:
        """Forward again; accept again on the same port after a :meth:`cut`."""
        with self._lock:
            if self._listener is None:
                self._listen(self.port)
            if self._frozen:
                self._frozen = False
                for sock in self._peers:
                    self._selector.register(sock, selectors.EVENT_READ, "peer")
        self._wake()

    @property
    def frozen(self) -> bool:
        with self._lock:
            return self._frozen

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._peers) // 2

    def close(self) -> None:
        self.cut()
        self._running = False
        self._wake()
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- the loop --------------------------------------------------------------------------------------

    def _listen(self, port: int) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ, "listener")
        return int(listener.getsockname()[1])

    def _wake(self) -> None:
        self._wake_w.send(b"x")

    def _drop(self, sock: socket.socket) -> None:
        """Close a connection and its other end (under the lock)."""
        if sock not in self._peers:
            return  # dropped with its other end already
        for end in (sock, self._peers[sock]):
            self._peers.pop(end, None)
            if not self._frozen:  # a frozen connection is not registered
                self._selector.unregister(end)
            end.close()

    def _serve(self) -> None:
        while self._running:
            for key, _ in self._selector.select():
                with self._lock:
                    if key.data is None:
                        self._wake_r.recv(4096)
                    elif key.data == "listener" and self._listener is not None:
                        self._accept()
                    elif key.data == "peer" and key.fileobj in self._peers and not self._frozen:
                        self._forward(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        server = socket.create_connection(self.upstream)
        self._peers[client] = server
        self._peers[server] = client
        if not self._frozen:
            for end in (client, server):
                self._selector.register(end, selectors.EVENT_READ, "peer")

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(sock)
            return
        try:
            self._peers[sock].sendall(data)
        except OSError:
            self._drop(sock)


@contextmanager
def pg_proxy(url: str) -> Iterator[tuple[PgProxy, str]]:
    """A proxy to the server of ``url``, and ``url`` through it."""
    parts = urlsplit(url)
    proxy = PgProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    try:
        yield proxy, proxy.url(url)
    finally:
        proxy.close()

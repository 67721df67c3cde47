"""The operations endpoints, served from inside the worker's asyncio loop.

``GET /healthz`` and ``GET /readyz`` answer 200 or 503 with a JSON body (:class:`~.health.Probe`);
``GET /metrics`` answers the Prometheus text format (or OpenMetrics when the scraper asks for it, gzip
when it accepts it); ``GET /`` lists the endpoints. ``HEAD`` works on all of them.

**A probe is always answered** (issue #22). The port is reachable from the cluster network (the kubelet
probes the pod IP), so anyone there can open connections and hold them. A new connection is never
refused: when a client holds more than :data:`MAX_PER_CLIENT` connections, its oldest is closed; when
all clients together hold more than :data:`MAX_CONNECTIONS`, the oldest connection of the client holding
the most is closed. A probe sends its request as soon as it connects and is answered within
milliseconds, so it is never the oldest; what gets closed is whatever sits idle or trickles its request
(slow loris). A request head must also arrive whole within :data:`HEAD_TIMEOUT`, and an answer be taken
within :data:`WRITE_TIMEOUT`. (Before: beyond 32 connections every new one — ``/healthz`` included — was
answered 503, so 40 idle connections failed every probe.)

Why a hand-written HTTP/1.1 responder on ``asyncio.start_server`` and not ``aiohttp.web`` (a runtime
dependency already; weighed again for issue #25, on aiohttp 3.14) or prometheus-client's server:
- it must run in the worker's own event loop, so that a blocked loop fails the probes (a server in a
  thread — prometheus-client's ``start_http_server`` — would keep answering "alive" for a dead loop),
  and start and stop with the worker; aiohttp.web would do that;
- what makes it safe is the connection policy above, and aiohttp.web has no cap on connections, per
  client or in all, nor a documented hook to close another connection when one arrives: the only place
  is ``web.Server.connection_made``/``connection_lost``, undocumented internals of its low-level server
  (the kind of access ``tests/unit/core/test_private_access.py`` exists to keep out);
- it cannot give the answers the ops tests assert: a request head over :data:`MAX_HEAD_BYTES` is
  answered 400 by aiohttp's parser (``LineTooLong`` is a ``BadHttpMessage``), not 431; and it has no
  deadline for a request head to arrive (its keep-alive timer runs between requests, not within one),
  so :data:`HEAD_TIMEOUT`'s 408 would go;
- the surface is tiny and closed: GET/HEAD, no request bodies, no keep-alive (``Connection: close``),
  a bounded request head. The body of ``/metrics`` comes from prometheus-client's own encoders, through
  :meth:`Telemetry.exposition` (``telemetry.py`` is the one module that imports prometheus-client).
"""

from __future__ import annotations

import asyncio
import collections
import gzip
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import structlog

from trace_scorer.ops.health import Health, Probe
from trace_scorer.ops.telemetry import Telemetry

log = structlog.get_logger(__name__)

#: The request line and headers must fit in this many bytes and arrive within this many seconds.
MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT = 5.0
#: An answer not taken by the client within this many seconds is dropped (a client that never reads).
WRITE_TIMEOUT = 5.0
#: Connections one client (address) may hold open; a new one closes that client's oldest.
MAX_PER_CLIENT = 8
#: Connections all clients may hold open; a new one closes the oldest of the client holding the most.
MAX_CONNECTIONS = 64

ENDPOINTS = {
    "/healthz": "liveness: the scheduler loop is alive",
    "/readyz": "readiness: configuration loaded, Langfuse reachable with valid credentials",
    "/metrics": "Prometheus metrics",
}


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def _json(status: int, payload: dict[str, Any]) -> Response:
    return Response(status, json.dumps(payload, indent=None).encode() + b"\n", "application/json")


def _probe(probe: Probe) -> Response:
    return _json(200 if probe.ok else 503, probe.body())


class OpsServer:
    """``await server.start()`` binds and serves in the running loop; ``await server.stop()`` closes."""

    def __init__(self, health: Health, telemetry: Telemetry, *, host: str = "127.0.0.1", port: int = 9477) -> None:
        self.health = health
        self.telemetry = telemetry
        self.host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        #: Open connections and their client's address, oldest first.
        self._open: dict[asyncio.StreamWriter, str] = {}

    @property
    def port(self) -> int:
        """The bound port (the real one when configured as 0)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else "[::1]" if self.host == "::" else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._accept, self.host, self._port, limit=MAX_HEAD_BYTES)
        log.info("ops_server_started", host=self.host, port=self.port, endpoints=sorted(ENDPOINTS))

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._open):  # each connection's task ends on its own once its reader sees the end
            self._close(writer, "the server stops")
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()
        log.info("ops_server_stopped")

    async def __aenter__(self) -> OpsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- connections ----------------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._admit(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, or was closed to make room
        except Exception:  # never let one request take the server down
            log.exception("ops_server_error")
        finally:
            self._connections.discard(task)
            self._open.pop(writer, None)
            writer.close()
            try:  # the answer is flushed first, unless the client will not take it
                await asyncio.wait_for(writer.wait_closed(), WRITE_TIMEOUT)
            except TimeoutError:
                writer.transport.abort()
            except Exception:
                pass

    def _admit(self, writer: asyncio.StreamWriter) -> None:
        """Take the new connection; make room by closing the oldest of whoever holds too many (module
        docstring). Never the new one: that would let held connections refuse a probe."""
        peer = writer.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        self._open[writer] = client
        mine = [w for w, c in self._open.items() if c == client]
        if len(mine) > MAX_PER_CLIENT:
            self._close(mine[0], "too many connections from this client")
        if len(self._open) > MAX_CONNECTIONS:
            held = collections.Counter(self._open.values())
            greediest = max(held, key=held.__getitem__)  # ties: the client of the oldest connection
            oldest = next(w for w, c in self._open.items() if c == greediest)
            self._close(oldest, "too many connections")

    def _close(self, writer: asyncio.StreamWriter, why: str) -> None:
        """Drop a held connection at once (nothing of it is worth flushing); its reader sees the end, so its
        task finishes on its own."""
        client = self._open.pop(writer, "?")
        log.debug("ops_connection_closed", client=client, reason=why)
        writer.transport.abort()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except (asyncio.LimitOverrunError, ValueError):
            await self._send(writer, _json(431, {"status": "fail", "reason": "request head too large"}), head=False)
            return
        except TimeoutError:
            await self._send(writer, _json(408, {"status": "fail", "reason": "request head timed out"}), head=False)
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._send(writer, _json(400, {"status": "fail", "reason": "bad request line"}), head=False)
            return
        method, target, _version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            response = Response(405, b"", "text/plain", (("Allow", "GET, HEAD"),))
        else:
            response = self._route(path, headers)
        await self._send(writer, response, head=method == "HEAD")

    def _route(self, path: str, headers: dict[str, str]) -> Response:
        if path == "/healthz":
            return _probe(self.health.liveness())
        if path == "/readyz":
            return _probe(self.health.readiness())
        if path == "/metrics":
            body, content_type = self.telemetry.exposition(headers.get("accept", ""))
            if "gzip" in headers.get("accept-encoding", ""):
                return Response(200, gzip.compress(body), content_type, (("Content-Encoding", "gzip"),))
            return Response(200, body, content_type)
        if path == "/":
            text = "trace-scorer\n" + "".join(f"{p}  {what}\n" for p, what in ENDPOINTS.items())
            return Response(200, text.encode(), "text/plain; charset=utf-8")
        return _json(404, {"status": "fail", "reason": f"no such endpoint: {path[:100]}", "endpoints": list(ENDPOINTS)})

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, response: Response, *, head: bool) -> None:
        phrase = HTTPStatus(response.status).phrase
        lines = [
            f"HTTP/1.1 {response.status} {phrase}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
            "Cache-Control: no-store",
            "Connection: close",
            *(f"{name}: {value}" for name, value in response.headers),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head:
            writer.write(response.body)
        try:
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)
        except TimeoutError:  # a client that does not take its answer: dropped, not waited on to close
            writer.transport.abort()

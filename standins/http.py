"""A small HTTP/1.1 server on asyncio streams, shared by the stand-ins.

Why not an ASGI server and framework: the stand-ins need byte-level control that a framework hides
(answer with headers and half a body, then cut the connection; close a connection without any answer),
the request surface is a handful of JSON routes, and no dependency is needed for it. What is supported
is what the clients in this project send: keep-alive, ``Content-Length`` or chunked request bodies,
``Content-Encoding: gzip`` request bodies (the OTLP exporter compresses), no pipelining guarantees
beyond answering requests of one connection in order.

Only loopback: :class:`HttpServer` binds ``127.0.0.1`` and port 0 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

#: Largest request body read (bytes); bigger requests get 413 before the handler sees them.
MAX_BODY = 16 * 1024 * 1024
#: Longest request line or header line.
MAX_LINE = 64 * 1024
#: Seconds an idle keep-alive connection is kept.
IDLE_TIMEOUT = 75.0

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    207: "Multi-Status",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Request:
    method: str
    #: The request target as sent (path and query, percent-encoded).
    target: str
    headers: dict[str, str]
    body: bytes
    #: ``time.monotonic()`` when the request was complete.
    received: float
    peer: str = ""

    @property
    def raw_path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query_string(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""

    def query(self) -> dict[str, list[str]]:
        """Query parameters, each name with all its values in order (``a=1&a=2`` → ``{"a": ["1", "2"]}``)."""
        values: dict[str, list[str]] = {}
        for name, value in parse_qsl(self.query_string, keep_blank_values=True):
            values.setdefault(name, []).append(value)
        return values

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    #: Fault: "mid" sends the headers and part of the body, then cuts the connection; "before" closes
    #: the connection without any answer; "hang" answers nothing and holds the connection until the
    #: client gives up (its read timeout).
    drop: str | None = None

    @classmethod
    def json(cls, status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        return cls(status, data, dict(headers or {}))


Handler = Callable[[Request], Awaitable[Response]]


class BadRequest(Exception):
    """A request the server refuses before any handler sees it (status and reason)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        size = 0
        while True:
            line = await reader.readuntil(b"\n")
            length = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if length == 0:
                while (await reader.readuntil(b"\n")) not in (b"\r\n", b"\n"):
                    pass  # trailers
                break
            size += length
            if size > MAX_BODY:
                raise BadRequest(413, "request body too large")
            chunks.append(await reader.readexactly(length))
            await reader.readuntil(b"\n")
        body = b"".join(chunks)
    else:
        length = int(headers.get("content-length", "0") or "0")
        if length > MAX_BODY:
            raise BadRequest(413, "request body too large")
        body = await reader.readexactly(length) if length else b""
    return decode_body(headers, body)


def decode_body(headers: dict[str, str], body: bytes) -> bytes:
    """The body as sent before ``Content-Encoding: gzip`` (``headers`` lower-cased)."""
    if headers.get("content-encoding", "").lower() == "gzip" and body:
        try:
            return gzip.decompress(body)
        except OSError as error:
            raise BadRequest(400, f"body is not valid gzip: {error}") from None
    return body


def _encode(response: Response, keep_alive: bool) -> tuple[bytes, bytes]:
    reason = _REASONS.get(response.status, "Status")
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    headers = {"Content-Type": response.content_type, **response.headers}
    headers["Content-Length"] = str(len(response.body))
    headers["Connection"] = "keep-alive" if keep_alive else "close"
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), response.body


class HttpServer:
    """Serves ``handler`` on ``host:port`` (port 0: the OS picks; read :attr:`port` after :meth:`start`)."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the stand-ins listen on loopback only")
        self._handler = handler
        self._host = host
        self._requested_port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._connection, self._host, self._requested_port, backlog=1024, limit=MAX_LINE
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        peer = writer.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else ""
        try:
            while True:
                try:
                    request_line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT)
                except TimeoutError:
                    return
                if not request_line:
                    return
                if request_line in (b"\r\n", b"\n"):
                    continue
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                try:
                    method, target, version = request_line.decode("latin-1").split()
                except ValueError:
                    await self._write(writer, Response.json(400, {"message": "bad request line"}), False)
                    return
                keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
                try:
                    body = await _read_body(reader, headers)
                except BadRequest as error:
                    await self._write(writer, Response.json(error.status, {"message": str(error)}), False)
                    return
                request = Request(method.upper(), target, headers, body, time.monotonic(), peer_text)
                try:
                    response = await self._handler(request)
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # a stand-in bug: answer it, keep serving
                    response = Response.json(500, {"message": f"stand-in error: {type(error).__name__}: {error}"})
                if response.drop == "before":
                    writer.transport.abort()
                    return
                if response.drop == "hang":
                    await reader.read()  # until the client closes the connection
                    return
                if response.drop == "mid":
                    head, data = _encode(response, keep_alive)
                    writer.write(head + data[: max(1, len(data) // 2)])
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
                    writer.transport.abort()
                    return
                await self._write(writer, response, keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            return
        except asyncio.CancelledError:
            # The server is stopping. End the task normally: asyncio's stream callback (3.11) reports a
            # cancelled connection task as an error.
            return
        finally:
            if task is not None:
                self._connections.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, response: Response, keep_alive: bool) -> None:
        head, data = _encode(response, keep_alive)
        writer.write(head + data)
        await writer.drain()


class ServerThread:
    """Runs an :class:`HttpServer` on its own event loop in a daemon thread.

    ``setup`` (optional) runs on that loop before serving (e.g. to start background tasks).
    """

    def __init__(self, handler: Handler, *, port: int = 0, name: str = "standin") -> None:
        self._handler = handler
        self._port = port
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.port = 0

    def start(self, timeout: float = 10.0) -> int:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the stand-in server did not start")
        if self._error is not None:
            raise RuntimeError("the stand-in server failed to start") from self._error
        return self.port

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            server = HttpServer(self._handler, port=self._port)
            try:
                self.port = await server.start()
            except BaseException as error:
                self._error = error
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await server.stop()

        asyncio.run(main())

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)


def serve_forever(handler: Handler, *, port: int = 0, announce: Callable[[int], None]) -> None:
    """Serve until SIGTERM/SIGINT (the ``python -m standins.…`` entry points); ``announce(port)`` once up."""
    import signal

    async def main() -> None:
        server = HttpServer(handler, port=port)
        bound = await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        announce(bound)
        await stop.wait()
        await server.stop()

    asyncio.run(main())

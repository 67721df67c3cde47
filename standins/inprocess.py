"""A stand-in answering httpx requests in-process: the same app, no socket.

``await answer(app, request)`` hands an :class:`httpx.Request` to a stand-in's request path
(:meth:`standins.base.StandinApp.handle`: routing, contract, auth, faults, the handlers) and gives back
its :class:`httpx.Response` (a respx side effect, or an ``httpx.MockTransport`` handler). Tests keep
their fake clocks and run without threads or ports, against the very semantics the loopback server
has. Connection faults become the exceptions httpx raises for them on a real socket: a connection
closed without an answer (``reset``) and an answer cut half-way (``drop``) →
:class:`httpx.RemoteProtocolError`, an answer that never comes (``timeout``) → :class:`httpx.ReadTimeout`.
"""

from __future__ import annotations

import time

import httpx

from standins.base import StandinApp
from standins.http import BadRequest, Request, Response, decode_body


def _standin_request(request: httpx.Request) -> Request:
    """What the stand-in's HTTP server would have read off the socket for ``request``."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    target = request.url.raw_path.decode("ascii")
    return Request(request.method, target, headers, decode_body(headers, request.content), time.monotonic())


def _httpx_response(response: Response, request: httpx.Request) -> httpx.Response:
    """The answer as httpx receives it, or the error it raises for a faulted connection."""
    if response.drop == "before":
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
    if response.drop == "mid":
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body", request=request)
    if response.drop == "hang":
        raise httpx.ReadTimeout("timed out (the stand-in held the request)", request=request)
    headers = {"Content-Type": response.content_type, **response.headers}
    return httpx.Response(response.status, headers=headers, content=response.body, request=request)


async def answer(app: StandinApp, request: httpx.Request) -> httpx.Response:
    """``app``'s answer to ``request``, as if it had come over loopback."""
    await request.aread()
    try:
        standin_request = _standin_request(request)
    except BadRequest as error:
        return httpx.Response(error.status, json={"message": str(error)}, request=request)
    return _httpx_response(await app.handle(standin_request), request)


__all__ = ["answer"]

"""Signs of life from deep inside a long piece of work, for whoever watches it (the worker's liveness).

A tick can spend minutes in one Langfuse request — retried with back-off, or read from a server that
trickles its answer — and none of the code that knows (``retry.py``, ``langfuse/http/transport.py``) knows
which target it works for or that liveness exists. So the tick sets a listener for its own task with
:func:`reported_to` (a context variable: the tasks it starts inherit it, other targets' ticks have their
own) and that code calls :func:`moving` or :func:`pausing`. With no listener both do nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: Told of each sign of life: the seconds until the next one is due (0: as usual; a retry's wait: longer).
Listener = Callable[[float], None]

_listener: ContextVar[Listener | None] = ContextVar("trace_scorer_progress", default=None)


def moving() -> None:
    """The work moved just now (bytes of an answer arrived, a request went out)."""
    listener = _listener.get()
    if listener is not None:
        listener(0.0)


def pausing(seconds: float) -> None:
    """The work waits ``seconds`` on purpose (a retry's back-off, a Retry-After): quiet is expected."""
    listener = _listener.get()
    if listener is not None:
        listener(max(0.0, seconds))


@contextmanager
def reported_to(listener: Listener) -> Iterator[None]:
    """Within the block (and the tasks started in it), signs of life go to ``listener``."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)

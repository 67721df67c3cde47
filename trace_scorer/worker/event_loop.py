"""The event loop the worker's commands run on (``[worker] event_loop``): uvloop where it is installed, else
asyncio's own.

Why uvloop: the worker is an I/O loop (Langfuse reads and score posts, a judge's requests over aiohttp), and
uvloop runs the loop itself — polling, timers, socket reads and writes — in C (libuv), where asyncio's
selector loop runs it in Python: 4–7 % less of the worker's CPU a judged trace (bench/README.md, issue #29,
seventh round). It is a dependency everywhere it builds (Linux, macOS); elsewhere ``auto`` falls back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from trace_scorer.config.common import ConfigError
from trace_scorer.config.worker import EventLoop

T = TypeVar("T")


def loop_factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The new-loop function for ``choice`` (None: asyncio's default). Raises ConfigError naming
    ``worker.event_loop`` when uvloop is asked for by name and is not installed."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(
                "worker.event_loop: 'uvloop' is not installed here (pip install uvloop; it builds on Linux and "
                "macOS), or set event_loop = 'auto' or 'asyncio'"
            ) from None
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoop) -> T:
    """``asyncio.run(main)`` on the loop ``choice`` names; ``main`` is closed unrun when the loop cannot be
    had (no "never awaited" warning beside the configuration error)."""
    try:
        factory = loop_factory(choice)
    except ConfigError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)

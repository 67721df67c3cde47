"""Deadlines the test expires on an event (e.g. "the server is holding the request"), never on time.

Injected where the code takes a ``Deadline`` (``asyncio.timeout``'s contract): ``judge.deadline``,
``judge.use_deadline(...)``, ``provider.deadline``, ``client.transport.deadline``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ManualDeadlines:
    """Every deadline entered stays open until :meth:`expire` (then its body raises ``TimeoutError``)."""

    def __init__(self) -> None:
        #: The seconds of every deadline entered, in order.
        self.started: list[float] = []
        self._open: list[tuple[float, asyncio.Timeout]] = []

    @asynccontextmanager
    async def __call__(self, seconds: float) -> AsyncIterator[None]:
        self.started.append(seconds)
        async with asyncio.timeout(None) as timeout:
            entry = (seconds, timeout)
            self._open.append(entry)
            try:
                yield
            finally:
                self._open.remove(entry)

    @property
    def open(self) -> list[float]:
        """The seconds of the deadlines running now."""
        return [seconds for seconds, _ in self._open]

    def expire(self, seconds: float | None = None) -> int:
        """Run out every open deadline (of ``seconds``, when given) at the next turn of the loop."""
        now = asyncio.get_running_loop().time()
        chosen = [t for s, t in self._open if seconds is None or s == seconds]
        for timeout in chosen:
            timeout.reschedule(now)
        return len(chosen)

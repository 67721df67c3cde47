"""Time as the adapter sees it: injectable, so tests verify waits without sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol

import structlog

log = structlog.get_logger(__name__)


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (budget windows)."""
        ...

    def now(self) -> datetime:
        """The wall-clock time, UTC (to read a Retry-After given as an HTTP date)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


#: How far the local clock may differ from the server's before the server's time is used instead: the
#: ``Date`` header counts whole seconds and is written before the answer travels, so a right clock can
#: look up to a second or so off.
CLOCK_TOLERANCE_SECONDS = 2.0


class ServerTime:
    """The Langfuse server's own time, from the ``Date`` header of its answers (RFC 9110: an origin server
    with a clock sends it on every answer; Langfuse's Node server does).

    Between answers the time is carried forward on the monotonic clock, which a wall-clock step (NTP after
    a VM resume, a manual change) does not move. The estimate never runs ahead of the server: the header
    is cut to the second and written before the answer left, and the first answer showing a given second
    is the anchor (later answers with the same header would only move it later than it may be)."""

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._header: str | None = None
        self._anchor: tuple[datetime, float] | None = None
        #: The local clock's distance from the server's when it last went beyond the tolerance (None: within).
        self.skew: float | None = None

    def observe(self, date_header: str | None) -> None:
        """Take the time of one answer (its ``Date`` header; None or unreadable: nothing learnt)."""
        if not date_header or date_header == self._header:
            return
        try:
            seen = parsedate_to_datetime(date_header)
        except (TypeError, ValueError):
            return
        if seen.tzinfo is None:  # "-0000" in the header: UTC by RFC 5322
            seen = seen.replace(tzinfo=UTC)
        self._header = date_header
        self._anchor = (seen, self._monotonic())

    def now(self) -> datetime | None:
        """The server's time now, or None before any answer carried a ``Date``."""
        if self._anchor is None:
            return None
        seen, at = self._anchor
        return seen + timedelta(seconds=self._monotonic() - at)

    def present(self, local: datetime) -> datetime:
        """What time it is for choosing windows: the server's time when the local clock ``local`` is more
        than :data:`CLOCK_TOLERANCE_SECONDS` off it (a wall-clock step, a drifting host), else ``local``;
        ``local`` before any answer carried a ``Date``. Logged when the local clock goes off and back."""
        server = self.now()
        if server is None:
            return local
        offset = (local - server).total_seconds()
        if abs(offset) <= CLOCK_TOLERANCE_SECONDS:
            if self.skew is not None:
                log.info("clock_agrees_with_langfuse", offset_seconds=round(offset, 3))
                self.skew = None
            return local
        if self.skew is None:
            log.warning(
                "clock_disagrees_with_langfuse",
                offset_seconds=round(offset, 3),
                action="windows follow the server's time (Date header) until the clocks agree again",
            )
        self.skew = offset
        return server

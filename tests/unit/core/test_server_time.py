"""The Langfuse server's time from its ``Date`` headers (``langfuse/http/clock.py``): carried on the monotonic
clock, never ahead of the server, and used instead of the local clock only when that is off it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import structlog

from tests.support.clocks import ManualClock
from trace_scorer.langfuse.http.clock import CLOCK_TOLERANCE_SECONDS, ServerTime

NOON = datetime(2026, 10, 1, 12, 0, 0, tzinfo=UTC)
NOON_HEADER = "Thu, 01 Oct 2026 12:00:00 GMT"


def test_the_time_is_carried_forward_on_the_monotonic_clock() -> None:
    mono = ManualClock()
    server = ServerTime(mono)
    assert server.now() is None  # no answer yet
    server.observe(NOON_HEADER)
    mono.advance(30.5)
    assert server.now() == NOON + timedelta(seconds=30.5)


def test_the_first_answer_of_a_second_is_the_anchor() -> None:
    """Later answers with the same header were written later in that second: anchoring on them could put
    the estimate ahead of the server."""
    mono = ManualClock()
    server = ServerTime(mono)
    server.observe(NOON_HEADER)
    mono.advance(0.9)
    server.observe(NOON_HEADER)
    mono.advance(0.1)
    assert server.now() == NOON + timedelta(seconds=1)
    server.observe("Thu, 01 Oct 2026 12:00:01 GMT")
    mono.advance(2)
    assert server.now() == NOON + timedelta(seconds=3)


def test_missing_or_unreadable_headers_teach_nothing() -> None:
    mono = ManualClock()
    server = ServerTime(mono)
    for header in (None, "", "yesterday", "Thu, 99 Foo 2026"):
        server.observe(header)
    assert server.now() is None
    server.observe(NOON_HEADER)
    server.observe("not a date")
    assert server.now() == NOON


def test_the_local_clock_is_used_unless_it_is_off_the_servers() -> None:
    mono = ManualClock()
    server = ServerTime(mono)
    local = NOON + timedelta(hours=2)
    assert server.present(local) == local  # before any Date: nothing else to go by
    server.observe(NOON_HEADER)
    close = NOON + timedelta(seconds=CLOCK_TOLERANCE_SECONDS)
    assert server.present(close) == close  # the header's whole seconds and the answer's travel
    with structlog.testing.capture_logs() as logs:
        assert server.present(NOON + timedelta(hours=2)) == NOON  # stepped ahead
        assert server.present(NOON - timedelta(hours=1)) == NOON  # stepped back
        assert server.present(NOON + timedelta(seconds=1)) == NOON + timedelta(seconds=1)  # right again
    assert [(e["event"], e["offset_seconds"]) for e in logs] == [
        ("clock_disagrees_with_langfuse", 7200.0),
        ("clock_agrees_with_langfuse", 1.0),
    ]

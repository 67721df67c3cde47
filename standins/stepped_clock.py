"""``python -m standins.stepped_clock <trace-scorer args>``: ``trace-scorer`` whose wall clock is the real one
plus the seconds written in the file named by ``STANDIN_CLOCK_OFFSET_FILE`` (read at every look; absent
or empty: 0). The clock-step end-to-end test steps the clock by writing that file, as NTP steps it after a
VM resume; Langfuse (the stand-in) keeps the real time and dates its answers with it."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import trace_scorer.worker.service as service
from trace_scorer.cli import main

OFFSET_FILE = Path(os.environ["STANDIN_CLOCK_OFFSET_FILE"])


def stepped_now() -> datetime:
    """The real time plus the file's offset in seconds."""
    try:
        offset = float(OFFSET_FILE.read_text().strip() or 0)
    except FileNotFoundError:
        offset = 0.0
    return datetime.now(UTC) + timedelta(seconds=offset)


service.utc_now = stepped_now
sys.exit(main())

"""``backfill``'s progress bar: the share of the time range covered, the traces handled so far with their
rate, and the time left; log lines print above it, never through it.

The bar counts time, not windows: a window's traces are known only once it is read, so the part of the
range covered is what the ETA can rest on. The traces come from the run's :class:`TickReport`, which the
batches update as they go, so the count moves within a window too (rich redraws a few times a second).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn, TimeRemainingColumn
from rich.text import Text

from trace_scorer.runtime.logs import logs_above
from trace_scorer.worker.tick import TickReport


def handled(report: TickReport) -> int:
    """Traces the run is done with: scored, failed, skipped (any reason) or left for later (not ended)."""
    return report.scored + report.failed + sum(report.skipped.values()) + report.deferred


class TracesColumn(ProgressColumn):
    """``1,234 of 1,300 traces · 12.5/s``: handled of those listed so far, and the rate since the start."""

    def __init__(self, report: TickReport) -> None:
        super().__init__()
        self.report = report

    def render(self, task: Task) -> Text:
        done = handled(self.report)
        elapsed = task.elapsed or 0.0
        rate = f" · {done / elapsed:,.1f}/s" if elapsed > 0 else ""
        return Text(f"{done:,} of {self.report.seen:,} traces{rate}", style="progress.download")


class BackfillProgress:
    """The bar of one backfill over ``span`` of time; :meth:`covered` after each window."""

    def __init__(
        self, report: TickReport, span: timedelta, console: Console, get_time: Callable[[], float] | None = None
    ) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("backfill"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TracesColumn(report),
            TimeRemainingColumn(),
            console=console,
            transient=True,
            get_time=get_time,
        )
        self.task: TaskID = self.progress.add_task("backfill", total=span.total_seconds())

    def covered(self, window: timedelta) -> None:
        """One more window of the range is done."""
        self.progress.advance(self.task, window.total_seconds())

    @contextmanager
    def shown(self) -> Iterator[BackfillProgress]:
        """The bar on screen, with the log lines of the block printed above it."""
        with ExitStack() as stack:
            stack.enter_context(self.progress)
            stack.enter_context(logs_above(self.console))
            yield self

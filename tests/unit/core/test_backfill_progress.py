"""``backfill``'s bar (issue 23 item 9): traces handled with a rate and the time left, on a fake clock;
log lines printed above the bar, never through it — even when stderr is already redirected elsewhere."""

from __future__ import annotations

import io
import sys
from datetime import timedelta

import pytest
import structlog
from rich.console import Console
from rich.file_proxy import FileProxy

from trace_scorer.runtime.logs import configure_logging
from trace_scorer.worker.backfill_bar import BackfillProgress
from trace_scorer.worker.tick import TickReport

ERASE_LINE = "\r\x1b[2K"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=150, color_system=None), out


def test_the_bar_shows_traces_a_rate_and_the_time_left() -> None:
    console, out = terminal()
    clock, report = Clock(), TickReport("agent")
    bar = BackfillProgress(report, timedelta(hours=2), console, get_time=clock)
    with bar.shown():
        report.seen, report.scored, report.skipped["sampled out"] = 30, 10, 2
        clock.now = 2.0
        bar.covered(timedelta(minutes=30))
        report.seen, report.scored = 60, 38
        clock.now = 4.0
        bar.covered(timedelta(minutes=30))
        bar.progress.refresh()
        shown = out.getvalue().split(ERASE_LINE)[-1]
    # Half the range in 4 s: 4 s left; 40 traces handled in 4 s.
    assert "50%" in shown and "40 of 60 traces · 10.0/s" in shown and "0:00:04" in shown
    assert "/2" not in shown  # windows are not what it counts


@pytest.mark.parametrize("stderr_already_redirected", [False, True])
def test_log_lines_print_above_the_bar(monkeypatch: pytest.MonkeyPatch, stderr_already_redirected: bool) -> None:
    elsewhere = io.StringIO()
    if stderr_already_redirected:  # e.g. another live display: rich then leaves sys.stderr alone
        monkeypatch.setattr(sys, "stderr", FileProxy(Console(file=elsewhere, force_terminal=True), elsewhere))
    configure_logging("INFO", "console")
    console, out = terminal()
    report = TickReport("agent")
    bar = BackfillProgress(report, timedelta(hours=1), console, get_time=Clock())
    with bar.shown():
        bar.progress.refresh()
        structlog.get_logger().info("trace_scored", trace_id="t-1")
        bar.progress.refresh()
    text = out.getvalue()
    assert "trace_scored" in text and "trace_scored" not in elsewhere.getvalue()
    before, after = text.split("trace_scored", 1)
    # The bar's line is erased, the log line written in its place, the bar drawn again below it.
    assert ERASE_LINE in before and "backfill" not in before.rsplit(ERASE_LINE, 1)[-1]
    assert "backfill" in after  # the bar is drawn again below the line


def test_without_a_terminal_logs_go_to_stderr_unwrapped(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", "json")
    console = Console(file=io.StringIO(), width=40)  # not a terminal: no live display, JSON stays whole
    bar = BackfillProgress(TickReport("agent"), timedelta(hours=1), console, get_time=Clock())
    with bar.shown():
        structlog.get_logger().info("trace_scored", trace_id="t-" + "x" * 80)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("{") and line.endswith("}") and "x" * 80 in line

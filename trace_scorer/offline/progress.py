"""The one progress display of scoring files (``score``, ``compare``, ``calibrate``): bytes read and
samples scored, on stderr, only in a terminal.

Advanced per part read and per sample scored by the caller, never drawn per sample (rich redraws on its
own clock). Disabled, it is a no-op that imports nothing: rich's progress machinery costs start-up time
that a piped or redirected run does not need.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class ScoringProgress:
    """A bar over the input's bytes, with the count of samples scored; transient (gone once done)."""

    def __init__(self, total_bytes: int, *, enabled: bool) -> None:
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.samples = 0
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("scoring"),
            BarColumn(),
            TextColumn("{task.fields[samples]} samples"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._progress.add_task("scoring", total=total_bytes or None, samples=0)

    def advance(self, *, read: int = 0, scored: int = 0) -> None:
        """``read`` more bytes of the input were read, ``scored`` more samples scored."""
        self.samples += scored
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=read, samples=self.samples)

    def __enter__(self) -> ScoringProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

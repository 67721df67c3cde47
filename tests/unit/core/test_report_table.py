"""The table ``score`` prints is the one rich prints, byte for byte (offline/report.py ``plain_table``
writes it without rich's layout when nothing in it needs rich: it must never show otherwise)."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console, JustifyMethod
from rich.table import Table

from trace_scorer.offline.report import plain_table

#: Cells as the table has them (ids, numbers, labels, summaries), and some that rich must render itself.
WORDS = ["s1", "trace-7f3a", "agents.jsonl:12", "1.000", "0.333", "–", "failed", "0.642 (3 skipped)", "日本語", "ü"]
RICH_ONLY = ["[bold]x[/bold]", "a:smile:b", "tab\there", "two\nlines", "\x1b[31m"]


def rich_text(headers: list[str], justify: list[JustifyMethod], rows: list[list[str]], footer: list[str]) -> str:
    out = io.StringIO()
    table = Table(show_footer=True)
    for header, how, cell in zip(headers, justify, footer, strict=True):
        table.add_column(header, justify=how, footer=cell, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    Console(file=out, width=100_000).print(table)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(40))
def test_plain_cells_print_as_rich_prints_them(seed: int) -> None:
    r = random.Random(seed)
    columns = r.randint(0, 4)
    headers = ["sample", *(f"metric_{r.choice(WORDS)}" for _ in range(columns))]
    justify: list[JustifyMethod] = ["left", *(r.choice(["right", "left"]) for _ in range(columns))]
    rows = [[r.choice(WORDS) for _ in headers] for _ in range(r.randint(0, 6))]
    footer = [f"mean of {len(rows)}", *(r.choice(WORDS) for _ in range(columns))]
    console = Console(file=io.StringIO(), width=100_000)
    assert plain_table(console, headers, justify, rows, footer) == rich_text(headers, justify, rows, footer)


@pytest.mark.parametrize("cell", RICH_ONLY)
def test_cells_rich_would_change_are_left_to_rich(cell: str) -> None:
    console = Console(file=io.StringIO(), width=100_000)
    assert plain_table(console, ["sample"], ["left"], [[cell]], ["mean of 1"]) is None


def test_a_terminal_or_a_narrow_console_is_left_to_rich() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True, width=100_000)
    assert plain_table(terminal, ["sample"], ["left"], [["s1"]], ["mean of 1"]) is None
    narrow = Console(file=io.StringIO(), width=10)
    assert plain_table(narrow, ["sample"], ["left"], [["a-sample-id-longer-than-the-console"]], ["m"]) is None

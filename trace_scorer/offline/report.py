"""Print offline results: a readable table, or one JSON object per line (``--json``)."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import IO, Any

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table

from trace_scorer.data.outcomes import Failed, Score, Skipped
from trace_scorer.providers.usage import Usage
from trace_scorer.scoring.pipeline import GroupResult, SampleResult
from trace_scorer.scoring.plan import TargetPlan

SKIPPED_CELL = "–"
FAILED_CELL = "failed"


def _rounded(values: dict[str, float]) -> dict[str, float | None]:
    """Values to six places; a non-finite one (never expected: KPIs skip them) as null, so the line stays JSON."""
    return {name: round(value, 6) if math.isfinite(value) else None for name, value in values.items()}


def judge_details(result: SampleResult | GroupResult) -> dict[str, Any]:
    """Per judged score (scored or failed): what the judges said — each model's verdict, reasoning and
    votes, tokens, cost — the details the worker posts as the score's metadata."""
    return {
        name: dict(outcome.details)
        for name, outcome in result.outcomes.items()
        if isinstance(outcome, Score | Failed) and "models" in outcome.details
    }


def cut_notes(result: SampleResult) -> list[str]:
    """One note per text a metric scored only the beginning of (``details["cut"]``: longer than its
    ``max_chars``), so that ``--json`` and the table say so, not only the score's comment (issue 22)."""
    notes = []
    for name, outcome in result.outcomes.items():
        if not isinstance(outcome, Score) or not isinstance(cut := outcome.details.get("cut"), dict):
            continue
        limit = outcome.details.get("max_chars")
        for text, sizes in cut.items():
            kept, total = sizes.get("kept_chars"), sizes.get("total_chars")
            notes.append(f"{name}: {text} cut to its first {kept:,} of {total:,} characters (max_chars {limit:,})")
    return notes


def sample_notes(result: SampleResult) -> list[str]:
    """The sample's notes (extraction's), then what its metrics cut."""
    return [*result.sample.notes, *cut_notes(result)]


def sample_json(result: SampleResult) -> dict[str, Any]:
    """One sample's JSON object. One pass over the outcomes (this runs once per sample of a file: the
    seven passes it replaced were a tenth of ``score --json``'s time after reading and scoring); the same
    keys, in the same order, as :func:`group_json` and the helpers above give."""
    scores: dict[str, float | None] = {}
    kpis: dict[str, float | None] = {}
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    labels: dict[str, str] = {}
    judged: dict[str, Any] = {}
    kpi_names = result.kpi_names
    for name, outcome in result.outcomes.items():
        if isinstance(outcome, Score):
            value = outcome.value
            (kpis if name in kpi_names else scores)[name] = round(value, 6) if math.isfinite(value) else None
            if outcome.label is not None:
                labels[name] = outcome.label
        elif isinstance(outcome, Skipped):
            skipped[name] = outcome.reason
            continue
        elif isinstance(outcome, Failed):
            failed[name] = outcome.reason
        else:
            continue
        if "models" in outcome.details:
            judged[name] = dict(outcome.details)
    out: dict[str, Any] = {
        "id": result.sample.id,
        "scores": scores,
        "kpis": kpis,
        "skipped": skipped,
        "failed": failed,
        "notes": sample_notes(result),
    }
    if labels:  # BOOLEAN and CATEGORICAL scores: what Langfuse gets (the value is the category's position)
        out["labels"] = labels
    if judged:  # only judged targets: a deterministic line stays as it was
        out["judges"] = judged
    return out


def group_json(result: GroupResult) -> dict[str, Any]:
    return {
        "group": result.key,
        "size": result.size,
        "scores": _rounded(result.values(kpis=False)),
        "kpis": _rounded(result.values(kpis=True)),
        "skipped": result.reasons(Skipped),
        "failed": result.reasons(Failed),
    }


#: json.dumps(…, ensure_ascii=False, allow_nan=False), built once: json.dumps builds an encoder per call
#: when given options.
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def sample_json_line(result: SampleResult) -> str:
    """One sample's JSON line (without the newline)."""
    return _encode(sample_json(result))


def write_json_lines(
    out: IO[str],
    samples: Sequence[SampleResult],
    groups: Sequence[GroupResult],
    *,
    lines: Sequence[str] | None = None,
) -> None:
    """The samples' JSON lines (``lines``, when written while scoring), then the groups'."""
    for line in lines if lines is not None else map(sample_json_line, samples):
        out.write(line + "\n")
    for group in groups:
        out.write(_encode(group_json(group)) + "\n")


def _cell(result: SampleResult | GroupResult, name: str) -> str:
    outcome = result.outcomes.get(name)
    if outcome is None or isinstance(outcome, Skipped):
        return SKIPPED_CELL
    if isinstance(outcome, Failed):
        return FAILED_CELL
    return outcome.label if outcome.label is not None else _number(outcome.value)


def _number(value: float) -> str:
    """Three decimals for scores; trace facts (tokens, seconds, a cost of 0.0004 USD) to four significant
    digits, so that neither shows as a made-up 496.000 or 0.000."""
    return f"{value:.3f}" if value == 0 or 0.001 <= abs(value) <= 1 else f"{value:.4g}"


def _summary_cell(results: Sequence[SampleResult], name: str) -> str:
    scores = [o for r in results if isinstance(o := r.outcomes.get(name), Score)]
    values = [o.value for o in scores]
    skipped = sum(isinstance(r.outcomes.get(name), Skipped) for r in results)
    failed = sum(isinstance(r.outcomes.get(name), Failed) for r in results)
    text = _number(sum(values) / len(values)) if values else SKIPPED_CELL
    if labels := Counter(o.label for o in scores if o.label is not None):  # BOOLEAN, CATEGORICAL: no mean
        label, count = labels.most_common(1)[0]
        text = f"{label} {count}/{len(scores)}"
    extras = [f"{skipped} skipped"] * bool(skipped) + [f"{failed} failed"] * bool(failed)
    return f"{text} ({', '.join(extras)})" if extras else text


def print_report(
    as_json: bool,
    plan: TargetPlan,
    samples: Sequence[SampleResult],
    groups: Sequence[GroupResult],
    *,
    lines: Sequence[str] | None = None,
    out: IO[str] | None = None,
    judge_usage: Mapping[str, Usage] | None = None,
) -> None:
    """What ``score`` prints on stdout: JSON lines, or the target's table (columns from the plan) and,
    when judges were asked, their totals per model (also on stderr with ``--json``)."""
    if as_json:
        write_json_lines(out or sys.stdout, samples, groups, lines=lines)
        if judge_usage:
            print_judge_usage(Console(stderr=True), judge_usage)
        return
    columns = plan.sample_score_names() + [k.name for k in plan.sample_kpis]
    group_columns = plan.sample_score_names() + plan.group_score_names() + [k.name for k in plan.group_kpis]
    console = table_console()
    console.print(f"[bold]target {plan.target.name}[/bold]: {len(samples)} samples", highlight=False)
    print_table(console, columns, samples, groups, group_columns)
    if judge_usage:
        print_judge_usage(console, judge_usage)


def print_judge_usage(console: Console, usage: Mapping[str, Usage]) -> None:
    """The judges' totals per model: calls, tokens, cost (unknown without a price)."""
    console.print("[bold]Judges[/bold]")
    for model, spent in sorted(usage.items()):
        cost = f"${spent.cost:.6f}" if spent.cost is not None else "cost unknown (no price)"
        console.print(
            f"  {model}: {spent.calls} calls, {spent.prompt_tokens} prompt + {spent.completion_tokens} "
            f"completion tokens, {cost}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def table_console() -> Console:
    """A console for the table: the terminal's width, or unbounded when piped (rich would assume 80)."""
    console = Console()
    return console if console.is_terminal else Console(width=100_000)


def _plain(text: str) -> bool:
    """Whether rich prints ``text`` in a cell as it is: no markup (``[``), no emoji code (``:name:``),
    nothing unprintable (tabs, new lines, control codes)."""
    return text.isprintable() and "[" not in text and text.count(":") < 2


def plain_table(
    console: Console,
    headers: Sequence[str],
    justify: Sequence[JustifyMethod],
    rows: Sequence[Sequence[str]],
    footer: Sequence[str],
) -> str | None:
    """The text rich prints for ``Table(show_footer=True)`` of these cells (no_wrap columns) on a console
    without colours, or None when it may differ (colours, markup or odd characters in a cell, wider than
    the console): then rich renders it.

    Why by hand: rich lays out every cell of every row (segments, measures, styles) — 9 s for the 30,000
    rows of bench/bench_offline.py, three times the scoring; a table of plain text in columns as wide as
    their widest cell is the same bytes in a few milliseconds. tests/unit/core/test_report_table.py holds
    it to rich's output.
    """
    if console.is_terminal or console.color_system is not None:
        return None
    lines = [headers, *rows, footer]
    if not all(_plain(text) for line in lines for text in line):
        return None
    widths = [max(cell_len(line[column]) for line in lines) for column in range(len(headers))]
    if sum(widths) + 3 * len(widths) + 1 > console.width:
        return None

    def row(cells: Sequence[str], edge: str) -> str:
        padded = (
            " " * (width - cell_len(text)) + text if how == "right" else text + " " * (width - cell_len(text))
            for text, width, how in zip(cells, widths, justify, strict=True)
        )
        return f"{edge} " + f" {edge} ".join(padded) + f" {edge}"

    def rule(left: str, line: str, cross: str, right: str) -> str:
        return left + cross.join(line * (width + 2) for width in widths) + right

    out = [rule("┏", "━", "┳", "┓"), row(headers, "┃"), rule("┡", "━", "╇", "┩")]
    out.extend(row(cells, "│") for cells in rows)
    out += [rule("├", "─", "┼", "┤"), row(footer, "│"), rule("└", "─", "┴", "┘")]
    return "\n".join(out) + "\n"


def print_table(
    console: Console,
    columns: Sequence[str],
    samples: Sequence[SampleResult],
    groups: Sequence[GroupResult],
    group_columns: Sequence[str],
) -> None:
    """One row per sample, one column per score, a summary row of means; then groups; then why things were skipped."""
    rows = [[result.sample.id, *(_cell(result, name) for name in columns)] for result in samples]
    footer = [f"mean of {len(samples)}", *(_summary_cell(samples, name) for name in columns)]
    right: JustifyMethod = "right"
    justify: list[JustifyMethod] = ["left", *([right] * len(columns))]
    plain = plain_table(console, ["sample", *columns], justify, rows, footer)
    if plain is not None:
        console.file.write(plain)
    else:
        table = Table(show_footer=True)
        for header, cells_justify, cell_footer in zip(["sample", *columns], justify, footer, strict=True):
            table.add_column(header, justify=cells_justify, footer=cell_footer, no_wrap=True)
        for row in rows:
            table.add_row(*row)
        console.print(table)

    if groups:
        group_table = Table(title="groups", title_justify="left")
        group_table.add_column("group", no_wrap=True)
        group_table.add_column("samples", justify="right", no_wrap=True)
        for name in group_columns:
            group_table.add_column(name, justify="right", no_wrap=True)
        for group in groups:
            group_table.add_row(group.key, str(group.size), *(_cell(group, name) for name in group_columns))
        console.print(group_table)

    reasons: Counter[tuple[str, str, str]] = Counter()
    for result in samples:
        for name, reason in result.reasons(Skipped).items():
            reasons[("skipped", name, reason)] += 1
        for name, reason in result.reasons(Failed).items():
            reasons[("failed", name, reason)] += 1
    if reasons:
        console.print("[bold]Not scored[/bold]")
        for (kind, name, reason), count in sorted(reasons.items()):
            console.print(f"  {name}: {kind} ×{count}: {reason}", markup=False)
    notes = [(r.sample.id, note) for r in samples for note in sample_notes(r)]
    if notes:
        console.print("[bold]Notes[/bold]")
        for sample_id, note in notes:
            console.print(f"  {sample_id}: {note}", markup=False)

"""A comparison as terminal tables (rich): the verdict per score, the regressed items, the items of one
run only, pass@k; and the JSON form of ``--json``."""

from __future__ import annotations

import json
from typing import IO

from rich.console import Console
from rich.table import Table

from trace_scorer.compare.analysis import BETTER, WORSE, Comparison, MetricComparison, Report

#: Regressed items shown per worse (or changed) score in the terminal; the JSON and HTML have ``top``.
TERMINAL_ITEMS = 5
#: Item ids listed for "only in one run" before "and N more".
LISTED_IDS = 20
_STYLES = {BETTER: "green", WORSE: "red"}


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:LISTED_IDS])
    return shown + (f" and {len(ids) - LISTED_IDS} more" if len(ids) > LISTED_IDS else "")


def _verdict(metric: MetricComparison) -> str:
    style = _STYLES.get(metric.verdict)
    text = metric.verdict if metric.reason is None else f"{metric.verdict}: {metric.reason}"
    return f"[{style}]{text}[/{style}]" if style else text


def print_comparison(console: Console, comparison: Comparison) -> None:
    base, cand = comparison.baseline, comparison.candidate
    console.print(
        f"[bold]{cand.name}[/bold] ({cand.items} items, {cand.samples} samples) vs baseline "
        f"[bold]{base.name}[/bold] ({base.items} items, {base.samples} samples)",
        highlight=False,
    )
    table = Table(title_justify="left", show_lines=False)
    for column, justify in (
        ("score", "left"),
        ("baseline (n)", "right"),
        ("candidate (n)", "right"),
        ("paired", "right"),
        ("Δ mean", "right"),
        ("interval (Holm-adjusted level)", "right"),
        ("p (Holm)", "right"),
        ("detectable", "right"),
        ("verdict", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for m in comparison.metrics:
        table.add_row(
            m.name,
            f"{_number(m.baseline.mean)} ({m.baseline.items})",
            f"{_number(m.candidate.mean)} ({m.candidate.items})",
            str(m.paired),
            _number(m.difference, signed=True),
            m.interval_text(),
            _p(m.p_adjusted),
            f"±{m.detectable_difference:.3f}" if m.detectable_difference is not None else "–",
            _verdict(m),
        )
    console.print(table)
    for m in comparison.metrics:
        if (text := m.run_level_text()) is not None:
            console.print(f"note: {text} (docs/compare.md)", highlight=False)
    for m in comparison.metrics:
        if not m.worst_items or m.verdict == BETTER:
            continue
        items = Table(
            title=f"most regressed on {m.name} ({m.regressed} of {m.paired} items worse)", title_justify="left"
        )
        for column in ("item", "baseline", "candidate", "Δ", "candidate trace"):
            items.add_column(column)
        for change in m.worst_items[:TERMINAL_ITEMS]:
            trace = (change.candidate_links or change.candidate_traces or ["–"])[0]
            items.add_row(
                change.item, _number(change.baseline), _number(change.candidate), f"{change.difference:+.3f}", trace
            )
        console.print(items)
    if comparison.only_in_baseline:
        console.print(
            f"{len(comparison.only_in_baseline)} items only in the baseline: {_ids(comparison.only_in_baseline)}",
            highlight=False,
        )
    if comparison.only_in_candidate:
        console.print(
            f"{len(comparison.only_in_candidate)} items only in the candidate: {_ids(comparison.only_in_candidate)}",
            highlight=False,
        )
    if comparison.pass_curves:
        curves = Table(title=f"pass@k / pass^k ({comparison.pass_curves[0].criterion})", title_justify="left")
        curves.add_column("run")
        curves.add_column("k", justify="right")
        curves.add_column("items", justify="right")
        curves.add_column("pass@k [interval]", justify="right")
        curves.add_column("pass^k [interval]", justify="right")
        for curve in comparison.pass_curves:
            for point in curve.points:
                curves.add_row(
                    curve.run,
                    str(point.k),
                    str(point.items),
                    _with_interval(point.pass_at_k, point.pass_at_k_interval),
                    _with_interval(point.pass_hat_k, point.pass_hat_k_interval),
                )
        console.print(curves)
    for note in comparison.notes:
        console.print(f"note: {note}", highlight=False)


def _with_interval(value: float, interval: tuple[float, float] | None) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{value:.3f}"


def print_report(console: Console, report: Report) -> None:
    for index, comparison in enumerate(report.comparisons):
        if index:
            console.print()
        print_comparison(console, comparison)
    options = report.comparisons[0].options if report.comparisons else None
    if options is not None:
        console.print(
            f"[dim]Δ = candidate − baseline over items both runs scored; {options.interval} interval "
            f"({options.n_resamples} resamples, seed {options.seed}) at the level of the score's Holm step "
            f"(1 − α/(m − rank): {1 - options.alpha:.0%} with one score); "
            f"{options.test}, Holm-corrected across scores; better/worse at α = {options.alpha:g}; "
            "detectable: the difference these items would "
            "detect with 80 % power (docs/compare.md)[/dim]",
            highlight=False,
        )


def write_json(stream: IO[str], report: Report) -> None:
    stream.write(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n")

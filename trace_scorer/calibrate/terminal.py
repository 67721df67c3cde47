"""A calibration as terminal tables (rich): agreement per rater with intervals, Krippendorff's α, the
strictness votes, the tuned threshold, the panels; and the JSON of ``--json``."""

from __future__ import annotations

import json
from typing import IO

from rich.console import Console
from rich.table import Table

from trace_scorer.calibrate.agreement import BINARY_FIGURES, NUMERIC_FIGURES
from trace_scorer.calibrate.analysis import Calibration

#: Panels listed in the terminal (the JSON and the HTML report hold all).
TERMINAL_PANELS = 8
FIGURE_TITLES = {
    "accuracy": "accuracy",
    "precision": "precision",
    "recall": "recall",
    "f1": "F1",
    "kappa": "Cohen's κ",
    "weighted_kappa": "weighted κ",
    "spearman": "Spearman",
    "pearson": "Pearson",
    "mae": "MAE",
}


def _money(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def print_calibration(console: Console, calibration: Calibration) -> None:
    c = calibration
    console.print(
        f"[bold]{c.metric}[/bold] against the label [bold]{c.label}[/bold]: {c.items} labelled items ({c.kind})",
        highlight=False,
    )
    for reason, count in c.left_out.items():
        console.print(f"  left out: {count} items — {reason}", highlight=False)
    if c.kind == "binary":
        console.print(
            f"  the metric's verdict: correct when {c.metric} ≥ {c.options.threshold:g} ({c.options.threshold_source})"
            + ("; each model's: its value ≥ 0.5" if len(c.raters) > 1 else ""),
            highlight=False,
        )
    figures = BINARY_FIGURES if c.kind == "binary" else NUMERIC_FIGURES
    table = Table(title="agreement with the labels (95 % bootstrap intervals)", title_justify="left")
    table.add_column("rater", no_wrap=True)
    table.add_column("items", justify="right")
    for name in figures:
        table.add_column(FIGURE_TITLES[name], justify="right")
    if c.kind == "binary":
        table.add_column("TN FP / FN TP", justify="right")
    table.add_column("cost / 100 items", justify="right")
    for rater in c.raters:
        cells = [rater.figures[name].text() for name in figures]
        if rater.confusion is not None:
            (tn, fp), (fn, tp) = rater.confusion
            cells.append(f"{tn} {fp} / {fn} {tp}")
        table.add_row(rater.rater, str(rater.items), *cells, _money(rater.cost_per_100))
    console.print(table)
    if c.alpha is not None:
        console.print(f"Krippendorff's α (annotators and models): {c.alpha.text()}", highlight=False)
    for model, votes in c.strictness.items():
        console.print(
            f"strictness votes of {model}: α {votes['alpha'].text()}, unanimous on {votes['unanimous']:.1%} of "
            f"{votes['items']} items",
            highlight=False,
        )
    if (t := c.tuning) is not None:
        interval = f" [{t.low:.3f}, {t.high:.3f}]" if t.low is not None and t.high is not None else ""
        objective = "F1" if t.objective == "f1" else "Youden's J"
        console.print(
            f"[bold]threshold[/bold] maximising {objective}: {c.metric} ≥ {t.threshold:.4g}{interval} — "
            f"{objective} {t.objective_value:.3f} (default {t.default:g}: {t.default_value:.3f})",
            highlight=False,
        )
        if t.cv_value is not None and t.cv_default_value is not None:
            console.print(
                f"  cross-validated ({t.folds} folds, tuned on the others): {objective} {t.cv_value:.3f}, "
                f"default {t.cv_default_value:.3f}",
                highlight=False,
            )
    if (p := c.panels) is not None and p.best is not None and p.chosen is not None:
        title = f"panels by {FIGURE_TITLES[p.figure]} on {p.items} items every model judged"
        panels = Table(title=title, title_justify="left")
        for column in ("panel", FIGURE_TITLES[p.figure], "cost / 100 items"):
            panels.add_column(column, justify="left" if column == "panel" else "right", no_wrap=True)
        for panel in p.panels[:TERMINAL_PANELS]:
            marks = (" (best)" if panel is p.best else "") + (" (chosen)" if panel is p.chosen else "")
            value = "–" if panel.agreement is None else f"{panel.agreement:.3f}"
            panels.add_row(panel.name + marks, value, _money(panel.cost_per_100))
        console.print(panels)
        gap = ""
        if p.difference is not None and p.low is not None and p.high is not None:
            real = "a real gap" if p.low > 0 else "within chance"
            gap = f"; best − chosen {p.difference:.3f} [{p.low:.3f}, {p.high:.3f}]: {real}"
        console.print(
            f"cheapest panel within {p.margin:g} of the best: [bold]{p.chosen.name}[/bold]{gap}", highlight=False
        )
    for note in c.notes:
        console.print(f"note: {note}", highlight=False)


def write_json(stream: IO[str], calibration: Calibration) -> None:
    stream.write(json.dumps(calibration.as_json(), ensure_ascii=False, allow_nan=False) + "\n")

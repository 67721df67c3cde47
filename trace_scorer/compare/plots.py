"""The report's plots, drawn with matplotlib (object API, no pyplot: no GUI backend, no global state) and
kept as inline SVG text, so the HTML report needs no network and no script to show them.

Each plot is a function of a comparison returning one ``<svg>`` element: the paired differences of every
score with their intervals, each score's distribution in both runs, the paired differences of each score,
the items that regressed most (baseline → candidate), and the pass@k / pass^k curves.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib as mpl
from matplotlib.figure import Figure

from trace_scorer.compare.analysis import BETTER, WORSE, Comparison, MetricComparison, PassCurve

BASELINE_COLOUR = "#7f8c9a"
CANDIDATE_COLOUR = "#2b6cb0"
VERDICT_COLOURS = {BETTER: "#2f855a", WORSE: "#c53030"}
NEUTRAL = "#4a5568"
_SVG_START = re.compile(r"<svg\b")


@contextmanager
def _style(name: str) -> Iterator[None]:
    """Text stays text (searchable, small); ids salted per plot so several SVGs can share one page."""
    with mpl.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": name,
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        yield


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    match = _SVG_START.search(text)
    return text[match.start() :] if match else text


def differences_plot(comparison: Comparison, name: str) -> str:
    """Every compared score's mean paired difference with its interval (a forest plot), coloured by verdict."""
    metrics = [m for m in comparison.metrics if m.difference is not None]
    with _style(name):
        figure = Figure(figsize=(7.0, 0.45 * max(len(metrics), 1) + 1.0))
        axes = figure.add_subplot()
        for row, metric in enumerate(reversed(metrics)):
            colour = VERDICT_COLOURS.get(metric.verdict, NEUTRAL)
            assert metric.difference is not None
            if metric.interval is not None:
                axes.plot(metric.interval, [row, row], color=colour, linewidth=2.5, solid_capstyle="butt")
            axes.plot([metric.difference], [row], "o", color=colour, markersize=7)
        axes.axvline(0.0, color="#a0aec0", linewidth=1, linestyle="--")
        axes.set_yticks(range(len(metrics)), [m.name for m in reversed(metrics)])
        axes.set_xlabel("candidate − baseline (mean over paired items; interval at its Holm step's level)")
        if not metrics:
            axes.text(0.5, 0.5, "no score was compared", ha="center", va="center", transform=axes.transAxes)
        return _svg(figure)


def distribution_plot(comparison: Comparison, metric: MetricComparison, name: str) -> str:
    """Both runs' per-item values of one score: overlaid histograms over the same bins, means marked."""
    values = metric.baseline_values + metric.candidate_values
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if low == high:
        low, high = low - 0.5, high + 0.5
    with _style(name):
        figure = Figure(figsize=(4.2, 2.6))
        axes = figure.add_subplot()
        bins = [low + (high - low) * i / 20 for i in range(21)]
        for run, run_values, colour, mean in (
            (comparison.baseline.name, metric.baseline_values, BASELINE_COLOUR, metric.baseline.mean),
            (comparison.candidate.name, metric.candidate_values, CANDIDATE_COLOUR, metric.candidate.mean),
        ):
            axes.hist(run_values, bins=bins, color=colour, alpha=0.55, label=f"{run} (n={len(run_values)})")
            if mean is not None:
                axes.axvline(mean, color=colour, linewidth=2)
        axes.set_xlabel(f"{metric.name} per item (lines: means)")
        axes.set_ylabel("items")
        axes.legend(frameon=False, fontsize=8)
        return _svg(figure)


def paired_plot(metric: MetricComparison, options_confidence: float, name: str) -> str:
    """One score's paired differences (candidate − baseline per item): a histogram with the mean and its
    interval shaded."""
    with _style(name):
        figure = Figure(figsize=(4.2, 2.6))
        axes = figure.add_subplot()
        differences = metric.differences or [0.0]
        low, high = min(*differences, 0.0), max(*differences, 0.0)
        if low == high:
            low, high = low - 0.5, high + 0.5
        bins = [low + (high - low) * i / 20 for i in range(21)]
        colour = VERDICT_COLOURS.get(metric.verdict, NEUTRAL)
        axes.hist(differences, bins=bins, color=colour, alpha=0.6)
        if metric.interval is not None:
            axes.axvspan(metric.interval[0], metric.interval[1], color=colour, alpha=0.15, linewidth=0)
        if metric.difference is not None:
            axes.axvline(metric.difference, color=colour, linewidth=2)
        axes.axvline(0.0, color="#a0aec0", linewidth=1, linestyle="--")
        level = metric.interval_confidence if metric.interval_confidence is not None else options_confidence
        axes.set_xlabel(f"Δ {metric.name} per item (line: mean; band: {level * 100:.4g} % interval)")
        axes.set_ylabel("items")
        return _svg(figure)


def regressions_plot(comparison: Comparison, metric: MetricComparison, name: str) -> str:
    """The items that regressed most on one score: a line from the baseline's value to the candidate's."""
    items = list(reversed(metric.worst_items))
    with _style(name):
        figure = Figure(figsize=(7.0, 0.32 * len(items) + 1.1))
        axes = figure.add_subplot()
        for row, change in enumerate(items):
            axes.plot([change.baseline, change.candidate], [row, row], color="#e2a3a3", linewidth=2, zorder=1)
        axes.scatter(
            [c.baseline for c in items],
            range(len(items)),
            color=BASELINE_COLOUR,
            label=comparison.baseline.name,
            zorder=2,
        )
        axes.scatter(
            [c.candidate for c in items],
            range(len(items)),
            color=VERDICT_COLOURS[WORSE],
            label=comparison.candidate.name,
            zorder=2,
        )
        axes.set_yticks(range(len(items)), [c.item for c in items])
        axes.set_xlabel(f"{metric.name}: baseline → candidate")
        axes.legend(frameon=False, fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2)
        return _svg(figure)


def pass_plot(curves: list[PassCurve], name: str) -> str:
    """pass@k (solid) and pass^k (dashed) against k for each run, with their intervals as bands."""
    with _style(name):
        figure = Figure(figsize=(6.0, 3.2))
        axes = figure.add_subplot()
        colours = [BASELINE_COLOUR, CANDIDATE_COLOUR, "#d69e2e", "#805ad5", "#38a169"]
        for index, curve in enumerate(curves):
            colour = colours[index % len(colours)]
            ks = [p.k for p in curve.points]
            for label, values, intervals, style in (
                ("pass@k", [p.pass_at_k for p in curve.points], [p.pass_at_k_interval for p in curve.points], "-"),
                ("pass^k", [p.pass_hat_k for p in curve.points], [p.pass_hat_k_interval for p in curve.points], "--"),
            ):
                axes.plot(ks, values, style, marker="o", color=colour, label=f"{curve.run} {label}")
                lows = [i[0] if i else v for i, v in zip(intervals, values, strict=True)]
                highs = [i[1] if i else v for i, v in zip(intervals, values, strict=True)]
                axes.fill_between(ks, lows, highs, color=colour, alpha=0.12, linewidth=0)
        axes.set_xlabel("k (attempts drawn)")
        axes.set_ylabel("share of items")
        axes.set_ylim(-0.02, 1.02)
        if curves:
            axes.set_xticks(sorted({p.k for c in curves for p in c.points}))
            axes.set_title(curves[0].criterion, fontsize=9)
        axes.legend(frameon=False, fontsize=8, loc="best")
        return _svg(figure)

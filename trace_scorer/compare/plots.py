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
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from trace_scorer.compare.analysis import BETTER, WORSE, Comparison, MetricComparison, PassCurve

BASELINE_COLOUR = "#7f8c9a"
CANDIDATE_COLOUR = "#2b6cb0"
VERDICT_COLOURS = {BETTER: "#2f855a", WORSE: "#c53030"}
NEUTRAL = "#4a5568"
#: Figure widths in inches: the page is ~1050 px (11 in at 96 px/in) and the SVGs are scaled to it (half
#: for the pair of a score's plots), so at these sizes their 9-point text shows at about 9 points.
WIDE, HALF = 10.5, 5.0
#: Characters of a run name shown in a legend.
LEGEND_NAME = 32
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
        figure = Figure(figsize=(WIDE, 0.45 * max(len(metrics), 1) + 1.0))
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


def _label(run: str) -> str:
    """A run name short enough for a legend (the full name is in the page's heading)."""
    return run if len(run) <= LEGEND_NAME else run[: LEGEND_NAME - 1] + "…"


def _legend_above(axes: Axes) -> None:
    """The legend above the axes, outside them: it never covers data, whatever the length of a run's name."""
    axes.legend(frameon=False, fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.2)


def distribution_figure(comparison: Comparison, metric: MetricComparison) -> Figure:
    """Both runs' per-item values of one score: side-by-side bars over the same bins (identical runs show
    two bars each, neither hidden behind the other), means as vertical lines (the baseline's dashed)."""
    values = metric.baseline_values + metric.candidate_values
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if low == high:
        low, high = low - 0.5, high + 0.5
    figure = Figure(figsize=(HALF, 3.2))
    axes = figure.add_subplot()
    bins = [low + (high - low) * i / 20 for i in range(21)]
    axes.hist(
        [metric.baseline_values, metric.candidate_values],
        bins=bins,
        color=[BASELINE_COLOUR, CANDIDATE_COLOUR],
        label=[
            f"{_label(comparison.baseline.name)} (n={len(metric.baseline_values)})",
            f"{_label(comparison.candidate.name)} (n={len(metric.candidate_values)})",
        ],
    )
    for mean, colour, style in (
        (metric.baseline.mean, BASELINE_COLOUR, "--"),
        (metric.candidate.mean, CANDIDATE_COLOUR, "-"),
    ):
        if mean is not None:
            axes.axvline(mean, color=colour, linewidth=2, linestyle=style)
    axes.set_xlabel(f"{metric.name} per item (lines: means)")
    axes.set_ylabel("items")
    _legend_above(axes)
    return figure


def distribution_plot(comparison: Comparison, metric: MetricComparison, name: str) -> str:
    """:func:`distribution_figure` as SVG."""
    with _style(name):
        return _svg(distribution_figure(comparison, metric))


def paired_plot(metric: MetricComparison, options_confidence: float, name: str) -> str:
    """One score's paired differences (candidate − baseline per item): a histogram with the mean and its
    interval shaded."""
    with _style(name):
        figure = Figure(figsize=(HALF, 2.9))
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
        figure = Figure(figsize=(WIDE, 0.32 * len(items) + 1.1))
        axes = figure.add_subplot()
        for row, change in enumerate(items):
            axes.plot([change.baseline, change.candidate], [row, row], color="#e2a3a3", linewidth=2, zorder=1)
        axes.scatter(
            [c.baseline for c in items],
            range(len(items)),
            color=BASELINE_COLOUR,
            label=_label(comparison.baseline.name),
            zorder=2,
        )
        axes.scatter(
            [c.candidate for c in items],
            range(len(items)),
            color=VERDICT_COLOURS[WORSE],
            label=_label(comparison.candidate.name),
            zorder=2,
        )
        axes.set_yticks(range(len(items)), [c.item for c in items])
        axes.set_xlabel(f"{metric.name}: baseline → candidate")
        axes.legend(frameon=False, fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2)
        return _svg(figure)


def pass_plot(curves: list[PassCurve], name: str) -> str:
    """pass@k (solid) and pass^k (dashed) against k for each run, with their intervals as bands."""
    with _style(name):
        figure = Figure(figsize=(WIDE - 2.0, 3.6))
        axes = figure.add_subplot()
        colours = [BASELINE_COLOUR, CANDIDATE_COLOUR, "#d69e2e", "#805ad5", "#38a169"]
        for index, curve in enumerate(curves):
            colour = colours[index % len(colours)]
            ks = [p.k for p in curve.points]
            for label, values, intervals, style in (
                ("pass@k", [p.pass_at_k for p in curve.points], [p.pass_at_k_interval for p in curve.points], "-"),
                ("pass^k", [p.pass_hat_k for p in curve.points], [p.pass_hat_k_interval for p in curve.points], "--"),
            ):
                axes.plot(ks, values, style, marker="o", color=colour, label=f"{_label(curve.run)} {label}")
                lows = [i[0] if i else v for i, v in zip(intervals, values, strict=True)]
                highs = [i[1] if i else v for i, v in zip(intervals, values, strict=True)]
                axes.fill_between(ks, lows, highs, color=colour, alpha=0.12, linewidth=0)
        axes.set_xlabel("k (attempts drawn)")
        axes.set_ylabel("share of items")
        axes.set_ylim(-0.02, 1.02)
        if curves:
            axes.set_xticks(sorted({p.k for c in curves for p in c.points}))
            axes.set_title(curves[0].criterion, fontsize=9)
        # Beside the axes, not inside: curves near 1 (pass@k) and near 0 (pass^k) leave no free corner.
        axes.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _svg(figure)

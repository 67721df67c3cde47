"""The calibration report's plots as inline SVG, drawn like the compare report's (:mod:`trace_scorer.compare.plots`:
its style and SVG export): agreement per rater with intervals, a confusion matrix per rater, the threshold
curve with the chosen and the default point, and each panel's cost against its agreement."""

from __future__ import annotations

from matplotlib.figure import Figure

from trace_scorer.calibrate.agreement import Agreement
from trace_scorer.calibrate.panels import PanelChoice
from trace_scorer.calibrate.thresholds import Tuning
from trace_scorer.compare.analysis import BETTER, WORSE
from trace_scorer.compare.plots import CANDIDATE_COLOUR, HALF, NEUTRAL, VERDICT_COLOURS, WIDE, _style, _svg

GOOD, BAD = VERDICT_COLOURS[BETTER], VERDICT_COLOURS[WORSE]


def agreement_plot(raters: list[Agreement], figure_name: str, title: str, name: str) -> str:
    """One figure (κ, Spearman…) per rater: the value (dot) and its interval (bar)."""
    shown = [r for r in raters if r.figures.get(figure_name) and r.figures[figure_name].value is not None]
    with _style(name):
        figure = Figure(figsize=(WIDE, 0.5 * max(len(shown), 1) + 1.0))
        axes = figure.add_subplot()
        for row, rater in enumerate(reversed(shown)):
            value = rater.figures[figure_name]
            if value.low is not None and value.high is not None:
                axes.plot([value.low, value.high], [row, row], color=CANDIDATE_COLOUR, linewidth=2.5)
            axes.plot([value.value or 0.0], [row], "o", color=CANDIDATE_COLOUR, markersize=7)
        axes.set_yticks(range(len(shown)), [r.rater for r in reversed(shown)])
        axes.axvline(0.0, color="#a0aec0", linewidth=1, linestyle="--")
        axes.set_xlabel(f"{title} with the labels (95 % bootstrap interval)")
        if not shown:
            axes.text(0.5, 0.5, "no figure could be computed", ha="center", va="center", transform=axes.transAxes)
        return _svg(figure)


def confusion_plot(rater: Agreement, name: str) -> str:
    """The 2 × 2 confusion matrix (rows: the labels; columns: the rater's verdicts), counts written in."""
    assert rater.confusion is not None
    with _style(name):
        figure = Figure(figsize=(3.2, 2.9))
        axes = figure.add_subplot()
        high = max(max(row) for row in rater.confusion) or 1
        axes.imshow(rater.confusion, cmap="Blues", vmin=0, vmax=high)  # from 0: a cell's shade is its count
        for i, row in enumerate(rater.confusion):
            for j, count in enumerate(row):
                colour = "white" if count > high / 2 else "#1a202c"
                axes.text(j, i, str(count), ha="center", va="center", color=colour, fontsize=11)
        axes.set_xticks([0, 1], ["fail", "pass"])
        axes.set_yticks([0, 1], ["fail", "pass"])
        axes.set_xlabel(f"{rater.rater} says")
        axes.set_ylabel("the labels say")
        return _svg(figure)


def threshold_plot(tuning: Tuning, metric: str, name: str) -> str:
    """F1 and Youden's J against the threshold; the chosen threshold (with its interval) and the default."""
    points = sorted(tuning.curve, key=lambda p: p.threshold)
    with _style(name):
        figure = Figure(figsize=(WIDE - 2.0, 3.6))
        axes = figure.add_subplot()
        xs = [p.threshold for p in points]
        # Steps: a threshold between two values predicts what the higher value does ("correct when ≥ t").
        axes.plot(xs, [p.f1 for p in points], color=CANDIDATE_COLOUR, label="F1", drawstyle="steps-pre")
        axes.plot(
            xs, [p.youden for p in points], color="#d69e2e", linestyle="--", label="Youden's J", drawstyle="steps-pre"
        )
        if tuning.low is not None and tuning.high is not None:
            axes.axvspan(tuning.low, tuning.high, color=GOOD, alpha=0.12, linewidth=0)
        axes.axvline(tuning.threshold, color=GOOD, linewidth=2, label=f"tuned {tuning.threshold:.3g}")
        axes.plot([tuning.threshold], [tuning.objective_value], "o", color=GOOD, markersize=8)
        axes.axvline(tuning.default, color=BAD, linewidth=1.5, linestyle=":", label=f"default {tuning.default:g}")
        axes.plot([tuning.default], [tuning.default_value], "s", color=BAD, markersize=7)
        axes.set_xlabel(f"threshold: correct when {metric} ≥ it")
        axes.set_ylabel("agreement with the labels")
        axes.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _svg(figure)


def cost_plot(panels: PanelChoice, title: str, name: str) -> str:
    """Each panel's cost per 100 items against its agreement; the best and the chosen ones labelled."""
    priced = [p for p in panels.panels if p.agreement is not None and p.cost_per_100 is not None]
    with _style(name):
        figure = Figure(figsize=(HALF + 2.0, 3.6))
        axes = figure.add_subplot()
        axes.scatter(
            [p.cost_per_100 or 0.0 for p in priced], [p.agreement or 0.0 for p in priced], color=NEUTRAL, alpha=0.6
        )
        for panel, colour, label in ((panels.best, CANDIDATE_COLOUR, "best"), (panels.chosen, GOOD, "chosen")):
            if panel is None or panel.cost_per_100 is None or panel.agreement is None:
                continue
            axes.scatter([panel.cost_per_100], [panel.agreement], color=colour, s=80, zorder=3)
            axes.annotate(
                f"{label}: {panel.name}",
                (panel.cost_per_100, panel.agreement),
                textcoords="offset points",
                xytext=(6, -12 if label == "chosen" else 6),
                fontsize=8,
            )
        axes.set_xlabel("cost per 100 items (USD)")
        axes.set_ylabel(title)
        if not priced:
            axes.text(0.5, 0.5, "no panel has a known cost", ha="center", va="center", transform=axes.transAxes)
        return _svg(figure)

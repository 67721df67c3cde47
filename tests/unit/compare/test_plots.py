"""The report's plots as a reader sees them (issue #23, item 10): a legend never covers the data, however
long a run's name, and two identical distributions both stay visible."""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from trace_scorer.compare import plots
from trace_scorer.compare.analysis import Comparison, Options, compare_runs
from trace_scorer.compare.runs import RunValues

FAST = Options(n_resamples=199)
LONG_NAME = "nightly-2026-11-25-gpt-4o-mini-temperature-0.7-retrieval-v3-long-context"


def comparison(baseline: list[float], candidate: list[float], candidate_name: str = "cand") -> Comparison:
    base, cand = RunValues("base", "base"), RunValues(candidate_name, candidate_name)
    for index, (b, c) in enumerate(zip(baseline, candidate, strict=True)):
        base.add(f"q{index}", None, {"acc": b})
        cand.add(f"q{index}", None, {"acc": c})
    return compare_runs(base, cand, FAST)


def drawn(figure: Figure) -> Figure:
    FigureCanvasAgg(figure).draw()  # type: ignore[no-untyped-call]
    return figure


def bars(figure: Figure, colour: str) -> list[Rectangle]:
    from matplotlib.colors import to_hex

    [axes] = figure.axes
    return [
        patch
        for patch in axes.patches
        if isinstance(patch, Rectangle) and patch.get_height() > 0 and to_hex(patch.get_facecolor()) == colour
    ]


def test_a_long_run_name_in_the_legend_does_not_cover_the_bars() -> None:
    values = [0.1, 0.2, 0.2, 0.5, 0.6, 0.6, 0.7, 0.9, 1.0, 1.0]
    result = comparison(values, [min(1.0, v + 0.05) for v in values], LONG_NAME)
    with plots._style("legend"):
        figure = drawn(plots.distribution_figure(result, result.metrics[0]))
    [axes] = figure.axes
    legend = axes.get_legend()
    assert legend is not None
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    plot_area = axes.get_window_extent(renderer)
    legend_box = legend.get_window_extent(renderer)
    assert not legend_box.overlaps(plot_area), (legend_box, plot_area)
    assert any("…" in text.get_text() for text in legend.get_texts())  # the name is shortened, not dropped


def test_identical_distributions_show_both_runs() -> None:
    values = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 1.0, 1.0]
    result = comparison(values, list(values))
    with plots._style("identical"):
        figure = drawn(plots.distribution_figure(result, result.metrics[0]))
    baseline, candidate = bars(figure, plots.BASELINE_COLOUR), bars(figure, plots.CANDIDATE_COLOUR)
    assert len(baseline) == len(candidate) > 0
    for bar in baseline:  # no baseline bar lies under a candidate bar
        left, right = bar.get_x(), bar.get_x() + bar.get_width()
        assert not any(c.get_x() <= left and right <= c.get_x() + c.get_width() for c in candidate), bar

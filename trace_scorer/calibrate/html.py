"""``calibrate --html FILE``: one self-contained HTML file in the compare report's style (inline CSS and SVG,
no script, nothing fetched), rendered with jinja2 (autoescaped: model names and ids are data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_scorer.calibrate.analysis import Calibration
from trace_scorer.calibrate.terminal import FIGURE_TITLES
from trace_scorer.compare.html import require_report_extra
from trace_scorer.errors import UserError

__all__ = ["render_html", "require_report_extra", "write_html"]


def _plots(calibration: Calibration) -> dict[str, Any]:
    from trace_scorer.calibrate import plots

    headline = "kappa" if calibration.kind == "binary" else "spearman"
    panel_title = FIGURE_TITLES[calibration.panels.figure] if calibration.panels else ""
    return {
        "agreement": plots.agreement_plot(calibration.raters, headline, FIGURE_TITLES[headline], "agreement"),
        "headline": FIGURE_TITLES[headline],
        "confusions": [
            (rater, plots.confusion_plot(rater, f"confusion-{index}"))
            for index, rater in enumerate(calibration.raters)
            if rater.confusion is not None
        ],
        "threshold": plots.threshold_plot(calibration.tuning, calibration.metric, "threshold")
        if calibration.tuning
        else None,
        "cost": plots.cost_plot(calibration.panels, panel_title, "cost") if calibration.panels else None,
        "panel_title": panel_title,
    }


def render_html(calibration: Calibration) -> str:
    require_report_extra()
    import jinja2

    from trace_scorer.calibrate.agreement import BINARY_FIGURES, NUMERIC_FIGURES
    from trace_scorer.calibrate.template import PAGE

    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return environment.from_string(PAGE).render(
        c=calibration,
        plots=_plots(calibration),
        figures=BINARY_FIGURES if calibration.kind == "binary" else NUMERIC_FIGURES,
        titles=FIGURE_TITLES,
    )


def write_html(path: Path, calibration: Calibration) -> None:
    text = render_html(calibration)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror or exc}") from None

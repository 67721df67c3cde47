"""``compare --html FILE``: one self-contained HTML file (inline CSS and SVG, no script, nothing fetched)
with the verdicts, the plots of :mod:`.plots`, the regressed items with their trace links, the items of
one run only and pass@k. Rendered with jinja2 (autoescaped: run names, item ids and links are data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_scorer.compare.analysis import BETTER, SAME, WORSE, Comparison, Report
from trace_scorer.errors import UserError
from trace_scorer.runtime.extras import require_extra

#: What the HTML report imports from the ``report`` extra.
REPORT_MODULES = ("matplotlib", "jinja2")


def require_report_extra() -> None:
    """Fail with the install command for this installation when the ``report`` extra is missing."""
    require_extra("report", REPORT_MODULES, "the HTML report (--html)")


def _plots(comparison: Comparison, index: int) -> dict[str, Any]:
    from trace_scorer.compare import plots

    prefix = f"c{index}"
    metrics = []
    for position, metric in enumerate(comparison.metrics):
        key = f"{prefix}-m{position}"
        entry: dict[str, Any] = {
            "metric": metric,
            "key": key,
            "distribution": None,
            "paired": None,
            "regressions": None,
        }
        if metric.baseline_values or metric.candidate_values:
            entry["distribution"] = plots.distribution_plot(comparison, metric, f"{key}-distribution")
        if metric.differences:
            entry["paired"] = plots.paired_plot(metric, comparison.options.confidence, f"{key}-paired")
        if metric.worst_items:
            entry["regressions"] = plots.regressions_plot(comparison, metric, f"{key}-regressions")
        metrics.append(entry)
    return {
        "comparison": comparison,
        "key": prefix,
        "differences": plots.differences_plot(comparison, f"{prefix}-differences"),
        "metrics": metrics,
        "pass": plots.pass_plot(comparison.pass_curves, f"{prefix}-pass") if comparison.pass_curves else None,
        "same": [m.name for m in comparison.metrics if m.verdict == SAME],
    }


def render_html(report: Report) -> str:
    require_report_extra()
    import jinja2

    from trace_scorer.compare.template import PAGE

    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(PAGE)
    return template.render(
        report=report,
        comparisons=[_plots(c, i) for i, c in enumerate(report.comparisons)],
        BETTER=BETTER,
        WORSE=WORSE,
    )


def write_html(path: Path, report: Report) -> None:
    text = render_html(report)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the report to {path}: {exc.strerror or exc}") from None

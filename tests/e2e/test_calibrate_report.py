"""``trace-scorer calibrate --html`` as a user runs it (a process), the report opened in headless Debian
chromium like the compare report (tests/e2e/test_compare_report.py): no console error, every plot drawn at a
readable size, and the example reads as it should — judge-large agrees with the people, judge-small does
not, and the cheapest panel as good as the best is judge-mid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_compare_report import browser  # noqa: F401  (the fixture: chromium, or skipped/failed)

EXAMPLE = Path(__file__).parents[2] / "examples" / "calibrate"

pytestmark = pytest.mark.slow

PLOTS_JS = """
return [...document.querySelectorAll('figure.plot')].map(figure => {
  const svg = figure.querySelector('svg');
  if (!svg) return {kind: figure.dataset.plot, svg: false};
  const box = svg.getBoundingClientRect();
  const axes = svg.querySelector('g[id^="axes_"]');
  const drawn = axes ? axes.getBBox() : {width: 0, height: 0};
  return {
    kind: figure.dataset.plot,
    svg: true,
    width: box.width,
    height: box.height,
    axesWidth: drawn.width,
    axesHeight: drawn.height,
    marks: svg.querySelectorAll('path, use, rect, line, polyline').length,
    texts: svg.querySelectorAll('text').length,
  };
});
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "calibrate.html"
    command = [
        sys.executable,
        "-m",
        "trace_scorer",
        "calibrate",
        str(EXAMPLE),
        "--metric",
        "helpful",
        "--html",
        str(path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"report written to {path}" in done.stderr
    return path


def test_the_calibration_report_renders_every_plot_without_a_console_error(
    browser: Any,  # noqa: F811
    report: Path,
) -> None:
    browser.get(report.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []

    plots = browser.execute_script(PLOTS_JS)
    assert sorted(p["kind"] for p in plots) == sorted(["agreement", "threshold", "cost", *["confusion"] * 4])
    for plot in plots:
        assert plot["svg"], plot
        assert plot["width"] > 150 and plot["height"] > 100, plot
        assert plot["axesWidth"] > 100 and plot["axesHeight"] > 50, plot
        assert plot["marks"] >= 4 and plot["texts"] >= 3, plot

    kappas = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('tr[data-rater]')]"
        ".map(row => [row.dataset.rater, row.querySelector('td[data-figure=kappa]').innerText]))"
    )
    assert set(kappas) == {"helpful (panel)", "judge-large", "judge-mid", "judge-small"}
    assert float(kappas["judge-large"].split()[0]) > 0.6 > 0.35 > float(kappas["judge-small"].split()[0])
    chosen = browser.execute_script("return document.querySelector('#panels .chosen').innerText")
    assert chosen == "judge-mid"

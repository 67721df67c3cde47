"""``trace-scorer compare --html`` as a user runs it (a process), the report opened in headless Debian
chromium (driven by selenium through Debian's chromedriver): no console error, every plot drawn, and the
shipped example reads as it should — better on tool_call_accuracy, worse on rouge, unchanged on tool_selection.

chromium and chromium-driver come from apt (``.ci/run`` installs them); without them the test is skipped
on a developer's machine and fails in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "compare"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
EXPECTED = {"tool_call_accuracy": "better", "rouge": "worse", "tool_selection": "no detectable difference"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromedriver are missing: .ci/run installs them (apt chromium chromium-driver)")
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1800",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "compare.html"
    command = [
        sys.executable, "-m", "trace_scorer", "compare", str(EXAMPLE), "--config", str(EXAMPLE / "settings.toml"),
        "--baseline", "baseline", "--candidate", "candidate", "--html", str(path),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"report written to {path}" in done.stderr
    return path


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
    pageWidth: figure.closest('section.comparison').getBoundingClientRect().width,
    height: box.height,
    axesWidth: drawn.width,
    axesHeight: drawn.height,
    marks: svg.querySelectorAll('path, use, rect, line, polyline').length,
    texts: svg.querySelectorAll('text').length,
  };
});
"""


def test_the_report_renders_every_plot_without_a_console_error(browser: Any, report: Path, tmp_path: Path) -> None:
    browser.get(report.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []

    plots = browser.execute_script(PLOTS_JS)
    kinds = sorted(p["kind"] for p in plots)
    assert kinds == sorted(["differences", *["distribution", "paired"] * 3, "regressions", "regressions", "pass"])
    for plot in plots:
        assert plot["svg"], plot
        assert plot["width"] > 200 and plot["height"] > 100, plot  # laid out at a readable size
        assert plot["axesWidth"] > 100 and plot["axesHeight"] > 50, plot  # the axes drew something
        assert plot["marks"] >= 5 and plot["texts"] >= 3, plot  # data marks and labelled ticks
        # The plots use the page: the full width alone, about half each when two stand side by side.
        share = 0.45 if plot["kind"] in ("distribution", "paired") else 0.95
        assert plot["width"] >= share * plot["pageWidth"], plot

    verdicts = browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('tr[data-metric]')]"
        ".map(row => [row.dataset.metric, row.querySelector('td.verdict').innerText]))"
    )
    assert verdicts == EXPECTED
    headline = browser.execute_script("return document.querySelector('.headline').innerText")
    assert "Better on tool_call_accuracy." in headline and "Worse on rouge." in headline
    assert "No detectable difference on tool_selection." in headline

    screenshot = tmp_path / "report.png"
    assert browser.save_screenshot(str(screenshot))
    from PIL import Image

    with Image.open(screenshot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    assert colours is not None and len(colours) > 50  # not a blank page

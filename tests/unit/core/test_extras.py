"""A missing extra names the command that installs it the way trace-scorer was installed (issue 23
item 6), and ``compare --html`` says so before any work."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trace_scorer import cli
from trace_scorer.errors import UserError
from trace_scorer.offline import command as offline_command
from trace_scorer.runtime import extras

EXAMPLE = Path(__file__).parents[3] / "examples" / "compare"


class _Dist:
    def __init__(self, direct_url: dict[str, object] | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


def installed_as(monkeypatch: pytest.MonkeyPatch, *dists: _Dist) -> None:
    def distributions(name: str) -> Iterator[_Dist]:
        assert name == "trace-scorer"
        return iter(dists)

    monkeypatch.setattr(extras.metadata, "distributions", distributions)


def test_an_editable_checkout_gets_pip_install_dash_e_in_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    # The checkout's own egg-info (no direct_url.json) comes first from inside the checkout.
    installed_as(
        monkeypatch, _Dist(None), _Dist({"url": "file:///home/me/trace%20scorer", "dir_info": {"editable": True}})
    )
    assert extras.install_command("report") == "pip install -e '.[report]' (in the checkout, /home/me/trace scorer)"


def test_a_folder_installed_without_e_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    installed_as(monkeypatch, _Dist({"url": "file:///src/ts", "dir_info": {}}))
    assert extras.install_command("report") == "pip install '/src/ts[report]'"


@pytest.mark.parametrize(
    "dists",
    [[], [_Dist(None)], [_Dist({"url": "https://example.com/ts.whl", "archive_info": {}})]],
)
def test_an_index_install_gets_the_package_name(monkeypatch: pytest.MonkeyPatch, dists: list[_Dist]) -> None:
    installed_as(monkeypatch, *dists)
    assert extras.install_command("report") == "pip install 'trace-scorer[report]'"


def test_require_extra_names_the_missing_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)  # find_spec: None, as when not installed
    installed_as(monkeypatch, _Dist({"url": "file:///c", "dir_info": {"editable": True}}))
    with pytest.raises(UserError, match=r"needs jinja2 \(the 'report' extra\): pip install -e '\.\[report\]'"):
        extras.require_extra("report", ["json", "jinja2"], "the HTML report")


def test_compare_html_without_the_extra_fails_before_scoring(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    installed_as(monkeypatch, _Dist({"url": "file:///c", "dir_info": {"editable": True}}))

    def scoring(*_args: object) -> None:
        raise AssertionError("the files were scored before the missing extra was found")

    monkeypatch.setattr(offline_command, "scored_files", scoring)
    report = tmp_path / "r.html"
    code = cli.main(["compare", str(EXAMPLE), "--baseline", "baseline", "--html", str(report)])
    assert code == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "the HTML report (--html) needs matplotlib" in err
    assert "pip install -e '.[report]' (in the checkout, /c)" in err
    assert not report.exists()

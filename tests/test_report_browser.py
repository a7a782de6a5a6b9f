"""The eval's HTML report in a real headless Chromium (Debian's chromium and chromium-driver,
driven by selenium): it renders, its charts are there and drawn, and the page logs no console
error. `make install` installs the browser when it is missing and the user is root; without it
the test skips, except under CI=true where it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [test] extra)")
from selenium.webdriver.common.by import By  # noqa: E402

from _chromium import browser, headless  # noqa: E402
from context_compactor.cli import main  # noqa: E402

EXAMPLE = REPO / "examples" / "agent_session.json"
BASELINE = REPO / "benches" / "baseline-0.1.toml"


@pytest.fixture(scope="module")
def chrome():  # type: ignore[no-untyped-def]
    d = headless(*browser(), size=(1100, 900))
    yield d
    d.quit()


def test_the_html_report_renders_with_its_charts_and_no_console_error(chrome, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    html = tmp_path / "report.html"
    assert main(["eval", str(EXAMPLE), "--max-tokens", "3000", "--baseline", str(BASELINE), "--html", str(html)]) == 0
    chrome.get(html.as_uri())
    assert chrome.title == "context-compactor eval"
    assert chrome.find_element(By.TAG_NAME, "h1").text == "context-compactor eval"
    tables = chrome.find_elements(By.TAG_NAME, "table")
    assert len(tables) == 2 and "artifact trail" in tables[0].text and "baseline" in tables[0].text
    charts = chrome.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2
    for chart in charts:
        # Drawn, not just present: laid out at its size, with one line per policy.
        assert chart.size["width"] >= 800 and chart.size["height"] >= 250
        lines = chart.find_elements(By.CSS_SELECTOR, "polyline.series")
        assert {ln.get_attribute("data-series") for ln in lines} == {"policy", "baseline", "truncation"}
        assert all(len((ln.get_attribute("points") or "").split()) >= 2 for ln in lines)
    errors = [e for e in chrome.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    png = chrome.get_screenshot_as_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000

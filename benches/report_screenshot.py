"""`make report`: the eval's HTML report over the corpus at a 10% window, opened in headless
Chromium (selenium, Debian's chromium + chromium-driver) and saved as a screenshot.

Writes target/eval-report.html and target/eval-report.png (the top 1,500 pixels: the overall
table and the first transcript's charts). Fails if the page logs a console error or has no charts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from context_compactor._html_report import render_html
from context_compactor.cli.common import read_toml
from context_compactor.eval import evaluate

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from _chromium import headless  # noqa: E402

CORPUS = Path(os.environ.get("CORPUS_DIR", REPO.parent / "shared" / "corpus"))
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus")


def chrome(size: tuple[int, int] = (1100, 900)) -> Any:
    """Headless Chromium (``tests/_chromium.py``): Debian's binary and driver when present."""
    binary = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    driver = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
    return headless(binary if Path(binary).exists() else None, driver if Path(driver).exists() else None, size)


def main() -> int:
    files = sorted((CORPUS / "openai").glob("*.json"))[:6]
    report = evaluate(files, window_ratio=0.1, baseline=read_toml(REPO / "benches" / "baseline-0.1.toml"))
    out = REPO / "target"
    out.mkdir(exist_ok=True)
    html = out / "eval-report.html"
    html.write_text(render_html(report), encoding="utf-8")
    d = chrome()
    try:
        d.get(html.as_uri())
        charts = d.find_elements(By.CSS_SELECTOR, "svg.chart")
        # The top of the page: the overall table and the first transcript's two charts.
        d.set_window_size(1100, 1500)
        png = out / "eval-report.png"
        d.save_screenshot(str(png))
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        d.quit()
    print(f"wrote {html} and {png}: {len(charts)} charts, {len(errors)} console errors")
    return 0 if charts and not errors else 1


if __name__ == "__main__":
    sys.exit(main())

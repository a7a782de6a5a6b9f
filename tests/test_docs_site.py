"""The docs site builds with --strict, offline, and every page of its navigation opens in a real
browser without a 404 or a console error (Debian's chromium + chromium-driver through selenium,
the site served on 127.0.0.1; as tests/test_report_browser.py: skipped without the browser, a
failure under CI=true)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

from _docs_site import browser_paths, chrome, console_errors, serve

REPO = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="mkdocs is not installed (the docs extra)")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [test] extra)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _fresh_build() -> Path | None:
    """site/ as `make docs` (run just before the tests by `make all`) built it, if it is newer than
    every source it is made from; read, never written."""
    built = REPO / "site" / "index.html"
    if not built.exists():
        return None
    sources = [REPO / "mkdocs.yml", REPO / "CHANGELOG.md", *(REPO / "docs").rglob("*")]
    sources += [*(REPO / "python" / "context_compactor").rglob("*.py*")]
    newest = max(p.stat().st_mtime for p in sources if p.is_file() and "__pycache__" not in p.parts)
    return built.parent if built.stat().st_mtime > newest else None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    fresh = _fresh_build()
    if fresh is not None:
        return fresh
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_site_is_built_offline_with_the_generated_files(site: Path) -> None:
    index = (site / "index.html").read_text(encoding="utf-8")
    # No web fonts, no CDN: every script and stylesheet is the site's own.
    assert "fonts.googleapis" not in index and "fonts.gstatic" not in index
    for tag in ("<script src=", '<link rel="stylesheet" href='):
        for part in index.split(tag)[1:]:
            url = part.split('"')[1]
            assert not urlparse(url).netloc, url
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert llms.startswith("# context-compactor") and "(getting-started.html)" in llms
    full = (site / "llms-full.txt").read_text(encoding="utf-8")
    assert "## Ten lines" in full and "| `max_context_tokens` | `128_000` |" in full
    config = (site / "configuration.html").read_text(encoding="utf-8")
    assert "summary_target_share" in config and "generated: config-table" in config


def test_every_navigation_link_opens_without_a_404_or_a_console_error(site: Path) -> None:
    paths = browser_paths()
    if paths is None:
        msg = "chromium and chromium-driver are not installed (make browser)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    with serve(site) as (base, not_found):
        driver = chrome(*paths)
        try:
            driver.get(base + "index.html")
            links = {
                urljoin(driver.current_url, a.get_attribute("href") or "").split("#")[0]
                for a in driver.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link[href]")
            }
            pages = sorted(u for u in links if u.startswith(base))
            assert len(pages) >= 20, pages
            problems: list[str] = []
            for url in pages:
                driver.get(url)
                if driver.title.startswith("404") or not driver.find_elements(By.CSS_SELECTOR, "article h1"):
                    problems.append(f"{url}: no page ({driver.title!r})")
                problems += [f"{url}: {e['message']}" for e in console_errors(driver)]
            # The search works offline too: its index and worker load from the site.
            driver.get(base + "getting-started.html")
            driver.find_element(By.CSS_SELECTOR, "label.md-search__icon, .md-search__input").click()
            driver.find_element(By.CSS_SELECTOR, "input.md-search__input").send_keys("summarizer")
            WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"))
            problems += [f"search: {e['message']}" for e in console_errors(driver)]
        finally:
            driver.quit()
    assert not_found == [] and problems == [], (not_found, problems)

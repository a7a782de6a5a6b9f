"""The built docs site: serve it on 127.0.0.1, open it in headless Chromium, take a screenshot.

Used by tests/test_docs_site.py (every navigation link followed) and, as a script, by
`make docs-screenshot`:

    python tests/_docs_site.py site target/docs-getting-started.png

writes a screenshot of the built Getting started page (site/getting-started.html) and fails if
the page logs a console error.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class _Handler(SimpleHTTPRequestHandler):
    """Serves the site; remembers every path answered 404."""

    not_found: list[str]

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code == 404:
            self.not_found.append(self.path)
        super().send_error(code, message, explain)


@contextlib.contextmanager
def serve(site: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``site`` on 127.0.0.1 (a free port) from a daemon thread: ``(base_url, not_found)``."""
    not_found: list[str] = []
    handler = type("Handler", (_Handler,), {"not_found": not_found})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", not_found
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def browser_paths() -> tuple[str, str] | None:
    """Debian's chromium and chromedriver (or $CHROMIUM / $CHROMEDRIVER), if installed."""
    binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


def chrome(binary: str, driver: str, width: int = 1200, height: int = 900):  # type: ignore[no-untyped-def]
    """A headless Chromium driven by selenium, with the browser console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}"):
        opts.add_argument(a)
    opts.binary_location = binary
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(driver))


def console_errors(driver) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(site: Path, png: Path, page: str = "getting-started.html") -> int:
    paths = browser_paths()
    if paths is None:
        print("chromium and chromedriver are not installed (make browser)", file=sys.stderr)
        return 1
    png.parent.mkdir(parents=True, exist_ok=True)
    with serve(site) as (base, not_found):
        d = chrome(*paths, width=1400, height=1400)
        try:
            d.get(base + page)
            title = d.title
            d.save_screenshot(str(png))
            errors = console_errors(d)
        finally:
            d.quit()
    print(f"wrote {png}: {title!r}, {len(errors)} console errors, {len(not_found)} not found {not_found}")
    return 0 if not errors and not not_found else 1


if __name__ == "__main__":
    site_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "site"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "target" / "docs-getting-started.png"
    sys.exit(screenshot(site_dir, out))

"""Headless Chromium for the browser tests (the eval report, the server's page) and the screenshot
make targets: Debian's chromium and chromium-driver, driven by selenium. `make install` installs
them (and a CJK font) when they are missing and the user is root."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest


def browser() -> tuple[str, str]:
    """The chromium binary and its driver; a test without them skips (fails under CI=true)."""
    binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not binary or not driver:
        msg = "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return binary, driver


def headless(binary: str | None, driver: str | None, size: tuple[int, int] = (1200, 900)) -> Any:
    """A headless Chrome session that keeps the page's console log (``get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={size[0]},{size[1]}"):
        opts.add_argument(a)
    if binary:
        opts.binary_location = binary
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=Service(driver) if driver else None)

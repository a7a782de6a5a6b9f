"""The summary cards page (seed 003's UI) in a real headless Chromium (Debian's chromium +
chromium-driver, driven by selenium, as the eval report's test): it renders, asks for the token
once, the context indicator turns orange at 70% and red at 90% of the budget, Compact compacts,
and a card expands to its original messages. No console error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _server import TOKEN, client, running

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [test] extra)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from _chromium import browser, headless  # noqa: E402
from _page_driver import SESSION, compact, grow_to, login, open_session  # noqa: E402


@pytest.fixture(scope="module")
def chrome():  # type: ignore[no-untyped-def]
    d = headless(*browser(), size=(1200, 900))
    yield d
    d.quit()


def test_the_page_indicator_cards_and_compact(chrome: Any, tmp_path: Path) -> None:
    with running(store=str(tmp_path / "sessions.db")) as server, client(server) as http:
        http.post("/v1/sessions", json={"session_id": SESSION, "config": {"max_context_tokens": 10_000}})
        n = grow_to(http, 0.4)
        login(chrome, server.url, TOKEN)
        assert chrome.title == "context-compactor"
        assert open_session(chrome) == "ok"
        # Once the app shows, the token form does not (the CSS once kept it on screen over the app).
        assert chrome.find_element(By.ID, "app").is_displayed()
        assert not chrome.find_element(By.ID, "login").is_displayed()
        n = grow_to(http, 0.7, n)
        assert open_session(chrome) == "warning"
        n = grow_to(http, 0.9, n)
        assert open_session(chrome) == "critical"
        before = len(chrome.find_elements(By.CSS_SELECTOR, "#messages li.message"))
        card = compact(chrome)
        toggle = card.find_element(By.CSS_SELECTOR, "button.toggle")
        count = int(toggle.text.split()[0])
        assert toggle.text == f"{count} earlier messages compressed" and count > 0
        assert toggle.get_attribute("aria-expanded") == "false"
        assert len(chrome.find_elements(By.CSS_SELECTOR, "#messages li.message")) < before
        assert chrome.find_element(By.ID, "indicator").get_attribute("data-level") == "ok"
        toggle.click()
        WebDriverWait(chrome, 20).until(lambda d: len(card.find_elements(By.CSS_SELECTOR, ".originals li")) == count)
        originals = card.find_elements(By.CSS_SELECTOR, ".originals li")
        history = http.get(f"/v1/sessions/{SESSION}/history").json()["messages"]
        assert "never delete customer data" not in originals[0].text  # the task is kept, not compressed
        assert originals[0].text.strip().endswith(history[1]["content"].strip())
        # The token is kept for the tab only.
        assert chrome.execute_script("return sessionStorage.getItem('context-compactor-token')") == TOKEN
        assert chrome.execute_script("return localStorage.length") == 0
        errors = [e for e in chrome.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        png = chrome.get_screenshot_as_png()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"

"""Driving the summary cards page in headless Chromium: shared by tests/test_server_page.py and
`make page-screenshot` (benches/page_screenshot.py)."""

from __future__ import annotations

from typing import Any

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

SESSION = "electron-chat"


def grow_to(http: Any, ratio: float, start: int = 0, session: str = SESSION, task: str | None = None) -> int:
    """Append user/assistant pairs to ``session`` until its usage ratio reaches ``ratio`` (the
    first user message opens with ``task``, the billing report's by default)."""
    i = start
    while True:
        check = http.get(f"/v1/sessions/{session}").json()["check"]
        if check["usage_ratio"] >= ratio:
            return i
        pair = [
            {"role": "user", "content": f"Question {i}: what does /srv/app/module{i}.py do? " + "context " * 40},
            {"role": "assistant", "content": f"Answer {i}: it computes the totals. " + "details " * 40},
        ]
        if i == 0:
            opening = task or "Build the billing report for /srv/app; never delete customer data."
            pair[0]["content"] = opening + " " + pair[0]["content"]
        http.post(f"/v1/sessions/{session}/messages", json={"messages": pair}).raise_for_status()
        i += 1


def login(d: Any, url: str, token: str) -> None:
    d.get(url + "/")
    wait = WebDriverWait(d, 20)
    field = wait.until(ec.visibility_of_element_located((By.ID, "token")))
    field.send_keys(token)
    d.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#sessions li[data-id="{SESSION}"]')))


def open_session(d: Any) -> str:
    """Reload the page (the token stays in sessionStorage), open the session, return its
    indicator's level."""
    d.refresh()
    wait = WebDriverWait(d, 20, ignored_exceptions=(StaleElementReferenceException,))
    selector = f'#sessions li[data-id="{SESSION}"]'

    def click(drv: Any) -> bool:
        drv.find_element(By.CSS_SELECTOR, selector).click()
        return True

    wait.until(click)
    wait.until(lambda drv: drv.find_element(By.ID, "title").text == SESSION)
    wait.until(lambda drv: drv.find_element(By.CSS_SELECTOR, selector + ".selected"))
    return str(d.find_element(By.ID, "indicator").get_attribute("data-level"))


def compact(d: Any) -> Any:
    """Click Compact and wait for the card; return it."""
    d.find_element(By.ID, "compact").click()
    wait = WebDriverWait(d, 30)
    wait.until(lambda drv: drv.find_element(By.ID, "status").text.startswith("Compacted"))
    return wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#messages li.card")))

"""`make page-screenshot`: the server's summary cards page in headless Chromium, saved as
target/server-page.png: three sessions in the list, at each level of the context indicator (one
compacted back under 70%, one orange from 70%, one red from 90%, its name and task in Chinese);
the first, compacted with the Compact button from over 90%, shown with its card expanded to the
original messages. Fails if the page logs a console error."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benches"))

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from _page_driver import SESSION, compact, grow_to, login, open_session  # noqa: E402
from context_compactor.server.run import BackgroundServer  # noqa: E402
from context_compactor.server.settings import ServerSettings  # noqa: E402
from report_screenshot import chrome  # noqa: E402


def main() -> int:
    import httpx2

    out = REPO / "target"
    out.mkdir(exist_ok=True)
    png = out / "server-page.png"
    with tempfile.TemporaryDirectory() as tmp:
        settings = ServerSettings(token="screenshot", port=0, store=str(Path(tmp) / "s.db"))
        with (
            BackgroundServer(settings) as server,
            httpx2.Client(base_url=server.url, headers={"X-Compactor-Token": "screenshot"}, trust_env=False) as http,
        ):
            config = {"max_context_tokens": 10_000}
            for sid in (SESSION, "agent-run-2", "研究助手"):
                http.post("/v1/sessions", json={"session_id": sid, "config": config}).raise_for_status()
            task = (
                "Build the billing report for /srv/app（导出账单报告，不要删除客户数据）; never delete customer data."
            )
            grow_to(http, 0.92, task=task)
            grow_to(http, 0.75, session="agent-run-2")
            grow_to(http, 0.93, session="研究助手", task="整理 2024 年的客户反馈，按产品线分类，不要遗漏退款请求。")
            d = chrome(size=(1200, 1000))
            try:
                d.set_window_size(1200, 900)
                login(d, server.url, "screenshot")
                open_session(d)
                card = compact(d)
                card.find_element(By.CSS_SELECTOR, "button.toggle").click()
                WebDriverWait(d, 20).until(lambda drv: card.find_elements(By.CSS_SELECTOR, ".originals li"))
                d.save_screenshot(str(png))
                errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            finally:
                d.quit()
    print(f"wrote {png}: {len(errors)} console errors")
    return 0 if not errors else 1


if __name__ == "__main__":
    raise SystemExit(main())

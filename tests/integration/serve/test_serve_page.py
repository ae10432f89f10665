"""The page at GET /, driven by a real headless browser (Debian's chromium through playwright's
Python package, never `playwright install`): type a text, read the top label, check it equals
/predict's. SERVE_UI_SCREENSHOT=docs/img/serve_ui.png keeps the screenshot for the docs."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="no chromium (apt-get install -y chromium) for the browser test")


@pytest.fixture
def server(models):
    """uvicorn on 127.0.0.1 (a free port) in a thread of this process, stopped at the end."""
    import uvicorn

    from tfm_cls.serve.app import create_app
    from tfm_cls.serve.settings import ServeSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(ServeSettings(model=str(models["pair"]), threads=1))
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    yield url
    srv.should_exit = True
    thread.join(15)


def test_the_page_shows_the_top_label_predict_gives(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    text, pair = "the film was a quiet delight", "the ending feels rushed"
    expected = httpx.post(server + "/predict", json={"inputs": [text, pair], "truncate": True}).json()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 640})
            page.goto(server + "/", timeout=20_000)
            page.wait_for_selector("#pair:not([hidden])", timeout=10_000)  # a pair model shows the second box
            page.fill("#text", text)
            page.fill("#pair", pair)
            page.click("#go")
            page.wait_for_selector("#top:not([hidden])", timeout=10_000)
            assert page.text_content("#top-label") == expected[0]["label"]
            bars = page.locator("#bars .label").all_text_contents()
            assert bars == [e["label"] for e in expected]
            assert "sentence pairs" in page.text_content("#subtitle")
            shot = Path(os.environ.get("SERVE_UI_SCREENSHOT") or tmp_path / "serve_ui.png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 5000
        finally:
            browser.close()

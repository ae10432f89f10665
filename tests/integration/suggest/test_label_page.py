"""`tfm-cls label`'s page in a real headless browser (Debian's chromium through playwright's Python
package, never `playwright install`): a key labels the shown text into DIR/train.jsonl, s skips,
"more" suggests again without the labelled texts; the server answers on loopback names only and
takes JSON only. LABEL_UI_SCREENSHOT=docs/img/label_page.png keeps the screenshot for the docs."""

import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tfm_cls.suggest.names import read_labels
from tfm_cls.suggest.pool import collect
from tfm_cls.suggest.server import LabelServer, LabelSession, listening_socket
from tfm_cls.suggest.suggester import Suggester

from .conftest import pool_rows

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def server(minilm, data_dir):
    texts = list(dict.fromkeys(r["text"] for r in pool_rows()))
    suggester = Suggester(collect(enumerate(texts, 1)), minilm, read_labels(data_dir / "labels.json"))
    server = LabelServer(LabelSession(suggester, data_dir, 4, "pool.txt"), listening_socket(0)).start()
    yield server.url.rstrip("/"), data_dir
    server.stop()


def train_rows(folder: Path) -> list[dict]:
    path = folder / "train.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_keys_label_into_train_jsonl_and_more_suggests_again(server, tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium (apt-get install -y chromium) for the browser test")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    url, folder = server
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 600})
            page.goto(url + "/", timeout=20_000)
            page.wait_for_selector("#card:not([hidden])", timeout=10_000)
            assert "guess:" in page.text_content("#guess") and "label names" in page.text_content("#guess")
            assert "cold start" in page.text_content("#reason")
            shot = Path(os.environ.get("LABEL_UI_SCREENSHOT") or tmp_path / "label_page.png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 5000
            first = page.text_content("#text")
            page.keyboard.press("2")  # food
            page.wait_for_function("document.querySelector('#position').textContent.startsWith('suggestion 2')")
            assert train_rows(folder) == [{"text": first, "label": "food"}]
            page.keyboard.press("s")  # skip the second
            third = page.text_content("#text")
            page.click("#keys button >> nth=0")  # animals, by the mouse
            page.wait_for_function("document.querySelector('#position').textContent.startsWith('suggestion 4')")
            page.keyboard.press("3")
            page.wait_for_selector("#done:not([hidden])", timeout=10_000)
            assert [r["text"] for r in train_rows(folder)] == [first, third, train_rows(folder)[2]["text"]]
            assert "animals 1" in page.text_content("#counts")
            page.keyboard.press("m")  # more: suggested again with the three labels
            page.wait_for_selector("#card:not([hidden])", timeout=20_000)
            assert "uncertain" in page.text_content("#reason")
            assert page.text_content("#text") not in {r["text"] for r in train_rows(folder)}
        finally:
            browser.close()


def request(url, method="GET", body=None, headers=None):
    req = urllib.request.Request(url, method=method, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def test_loopback_names_and_json_only(server):
    url, folder = server
    assert request(url + "/api/state")[0] == 200
    assert request(url + "/api/state", headers={"Host": "evil.example:80"})[0] == 403
    status, body = request(url + "/api/label", "POST", b"text=x&label=food",
                           {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415 and not train_rows(folder)
    status, body = request(url + "/api/label", "POST", json.dumps({"text": "x", "label": "nope"}).encode(),
                           {"Content-Type": "application/json"})
    assert status == 400 and "must be one of" in body["error"]
    status, body = request(url + "/api/label", "POST", json.dumps({"text": "a cat", "label": "animals"}).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200 and body["added"] == 1 and body["counts"] == [1, 0, 0]

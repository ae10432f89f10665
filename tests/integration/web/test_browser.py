"""The JS runtime in headless chromium (Debian's, driven by playwright's Python package; never
`playwright install`): the folder of `tfm-cls export --web` served from 127.0.0.1, its page's
rows against `tfm-cls infer` for every model, a text typed into the page, no request leaving the
folder, and one clear error on the page for each file it must refuse.
WEB_PAGE_SCREENSHOT=docs/img/web_page.png keeps the screenshot for the docs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kits import web_kit as W

from tfm_cls.errors import InferenceError
from tfm_cls.runtime.session import Classifier
from tfm_cls.web_export import BUNDLE_FILES, MODEL_FILE, write_web_folder

KINDS = ["single_label", "multi_label", "regression", "chunked", "chunked_max", "head_tail", "tail", "bag_of_terms"]
ENCODER_INT8 = ["single_label_int8", "multi_label_int8", "regression_int8"]


@pytest.fixture(scope="module")
def site(web_dist, web_models, bad_models, tmp_path_factory):
    """The folder `tfm-cls export --web` writes for the single-label model, the other models and
    the bad files beside it (models/, bad/), served on 127.0.0.1."""
    root = write_web_folder(web_models["single_label"], tmp_path_factory.mktemp("web_site") / "site", dist=web_dist)
    for sub, files in (("models", web_models), ("bad", bad_models)):
        (root / sub).mkdir()
        for path in files.values():
            shutil.copyfile(path, root / sub / path.name)
    url, server = W.serve_folder(root)
    yield root, url
    server.shutdown()


@pytest.fixture(scope="module")
def page(browser, site):
    root, url = site
    context = browser.new_context(viewport={"width": 1000, "height": 760})
    p = context.new_page()
    p.goto(url, timeout=20_000)
    p.evaluate("() => window.tfmCls.ready")
    yield p
    context.close()


def test_the_folder_holds_the_page_runtime_wasm_and_model(site):
    root, _ = site
    assert {*BUNDLE_FILES, MODEL_FILE} <= {p.name for p in root.iterdir()}
    notes = (root / "SERVING.txt").read_text(encoding="utf-8")
    assert "application/wasm" in notes and "python -m http.server" in notes


@pytest.mark.parametrize("kind", [*KINDS, *ENCODER_INT8, "bag_of_terms_int8"])
def test_page_rows_equal_tfm_cls_infer(page, web_models, expected, kind):
    """fp32 and the bag's int8 file (no integer product): scores within 1e-5; the encoders' int8
    files: every label equal, scores within W.INT8_TOLERANCE."""
    records, py = expected[kind]
    rows = page.evaluate("async ([url, inputs]) => { await window.tfmCls.load(url); return window.tfmCls.classify(inputs); }",
                         [f"models/{web_models[kind].name}", records])
    assert W.differences(rows, py, W.INT8_TOLERANCE if kind in ENCODER_INT8 else W.TOLERANCE) == []


def test_typed_texts_show_the_label_offline(browser, site, expected, tmp_path):
    """A fresh page: every request it makes stays in the folder (anything else is aborted and
    fails the test); the label it shows is the one `tfm-cls infer` gives."""
    _, url = site
    context = browser.new_context(viewport={"width": 1000, "height": 760})
    outside, failed = [], []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url)
                  else (outside.append(route.request.url), route.abort()))
    p = context.new_page()
    p.on("requestfailed", lambda r: failed.append(r.url))
    p.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    try:
        p.goto(url, timeout=20_000)
        p.wait_for_selector("#go:not([disabled])", timeout=20_000)
        records, py = expected["single_label"]
        texts = [records[i]["text"] for i in (3, 9, 17)]
        p.fill("#text", "\n".join(texts))
        p.click("#go")
        p.wait_for_selector("#results:not([hidden])", timeout=10_000)
        assert p.locator("#results .top .name").all_text_contents() == [py[i]["label"] for i in (3, 9, 17)]
        assert "single_label" in p.text_content("#facts") and p.is_hidden("#error")
        shot = Path(os.environ.get("WEB_PAGE_SCREENSHOT") or tmp_path / "web_page.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 5000
    finally:
        context.close()
    assert outside == [] and failed == []


@pytest.mark.parametrize("bad", ["not_ours", "truncated", "mismatch"])
def test_a_bad_file_shows_one_clear_error(browser, site, bad_models, bad):
    _, url = site
    context = browser.new_context()
    p = context.new_page()
    try:
        p.goto(f"{url}?model=bad/{bad}.onnx", timeout=20_000)
        message = p.evaluate("() => window.tfmCls.ready.then(() => null, (err) => err.message)")
        p.wait_for_selector("#error:not([hidden])", timeout=10_000)
        shown = p.text_content("#error")
        assert p.is_disabled("#go")
    finally:
        context.close()
    assert message == shown
    try:
        Classifier(str(bad_models[bad]))
    except InferenceError as err:
        python = str(err).replace(str(bad_models[bad]), f"bad/{bad}.onnx")
    if bad == "truncated":
        assert shown.startswith(f"bad/{bad}.onnx is not a readable ONNX model: ") and python.startswith(shown[:40])
    else:
        assert shown == python


def test_a_pair_model_shows_its_second_box_and_the_value(browser, site, expected):
    _, url = site
    context = browser.new_context()
    p = context.new_page()
    try:
        p.goto(f"{url}?model=models/regression.onnx", timeout=20_000)
        p.wait_for_selector("#pair-box:not([hidden])", timeout=20_000)
        records, py = expected["regression"]
        p.fill("#text", records[5]["text"])
        p.fill("#pair", records[5]["text_pair"])
        p.click("#go")
        p.wait_for_selector("#results:not([hidden])", timeout=10_000)
        shown = float(p.text_content("#results .top").removeprefix("value "))
        assert abs(shown - py[5]["value"]) <= W.TOLERANCE and "sentence pairs" in p.text_content("#facts")
    finally:
        context.close()


def test_a_bag_of_terms_page_says_it_has_no_encoder(browser, site, expected):
    _, url = site
    context = browser.new_context()
    p = context.new_page()
    try:
        p.goto(f"{url}?model=models/bag_of_terms.onnx", timeout=20_000)
        p.wait_for_selector("#go:not([disabled])", timeout=20_000)
        facts = p.text_content("#facts")
        records, py = expected["bag_of_terms"]
        p.fill("#text", records[-2]["text"])  # 100,000 characters, cut as infer cuts them
        p.click("#go")
        p.wait_for_selector("#results:not([hidden])", timeout=10_000)
        assert p.text_content("#results .top .name") == py[-2]["label"] and py[-2]["truncated"]
        assert p.text_content("#results .result .note") == "truncated"
    finally:
        context.close()
    assert "bag of terms, no encoder (" in facts and "512 buckets of token pairs, tfidf" in facts

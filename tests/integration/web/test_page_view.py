"""What the page shows, in headless chromium: texts one a row (a long pasted line does not wrap into
what looks like several texts) and each result numbered by its line; a many-label model's thresholds
named and folded behind one line, a few labels' named inline. WEB_PAGE_SCREENSHOT_MANY=PATH keeps the
screenshot of the many-label page."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from kits import serve_kit as K
from kits import web_kit as W

from tfm_cls.web_export import write_web_folder

MANY = [f"topic_{i:02d}" for i in range(30)]


@pytest.fixture(scope="module")
def many_label_site(web_dist, tmp_path_factory):
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.tokenizer import train_tokenizer
    from tfm_cls.runtime.heads import MultiLabel

    folder = tmp_path_factory.mktemp("many_labels")
    tok = train_tokenizer(K.TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=K.MAX_LENGTH))
    thresholds = np.round(np.linspace(0.2, 0.8, len(MANY)), 2)
    model = export_classifier(K.tiny(len(MANY), tok.get_vocab_size(), seed=3), folder / "many.onnx", tokenizer=tok,
                              labels=MANY, max_length=K.MAX_LENGTH, head=MultiLabel(thresholds=thresholds))
    root = write_web_folder(model, folder / "site", dist=web_dist)
    url, server = W.serve_folder(root)
    yield url, model
    server.shutdown()


def test_many_thresholds_are_named_and_folded_and_results_numbered(browser, many_label_site, tmp_path):
    url, model = many_label_site
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    p = context.new_page()
    try:
        p.goto(url, timeout=20_000)
        p.wait_for_selector("#go:not([disabled])", timeout=20_000)
        facts = p.locator("#facts")
        summary = facts.locator("details summary").all_text_contents()
        assert summary == ["30 labels", "one a label, 0.20 to 0.80 (show all 30)"]
        assert not facts.locator("details .thresholds").nth(1).is_visible()  # folded
        facts.locator("details summary").nth(1).click()
        cells = facts.locator("details .thresholds").nth(1).locator("span").all_text_contents()
        assert cells[0] == "topic_00 0.20" and cells[-1] == "topic_29 0.80" and len(cells) == 30
        long = "a long pasted review " * 60
        p.fill("#text", "\n".join(["short one", long, "third"]))
        assert p.text_content("#count") == "3 texts, one a line"
        box = p.eval_on_selector("#text", "e => [e.scrollWidth > e.clientWidth, getComputedStyle(e).whiteSpace]")
        assert box == [True, "pre"]  # the long line scrolls sideways: one text, one row
        p.click("#go")
        p.wait_for_selector("#results:not([hidden])", timeout=10_000)
        assert p.locator("#results .result .text .n").all_text_contents() == ["1.", "2.", "3."]
        shot = Path(os.environ.get("WEB_PAGE_SCREENSHOT_MANY") or tmp_path / "many.png")
        p.screenshot(path=str(shot), full_page=True)
    finally:
        context.close()


def test_a_few_labels_thresholds_are_named_inline(browser, web_dist, web_models, tmp_path):
    root = write_web_folder(web_models["multi_label"], tmp_path / "site", dist=web_dist)
    url, server = W.serve_folder(root)
    context = browser.new_context()
    p = context.new_page()
    try:
        p.goto(url, timeout=20_000)
        p.wait_for_selector("#go:not([disabled])", timeout=20_000)
        text = p.text_content("#facts")
        labels = K.ML_LABELS
        assert f"{labels[0]} 0.50, {labels[1]} 0.45, {labels[2]} 0.55, {labels[3]} 0.50" in text
        assert p.locator("#facts details").count() == 0
    finally:
        context.close()
        server.shutdown()

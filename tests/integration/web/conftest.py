"""Fixtures of the browser-runtime tests: the JS bundle (built once from web/'s pinned packages),
the tiny exports (once per session), the Python rows of each, and one headless chromium."""

from __future__ import annotations

import os
import shutil

import pytest
from kits import web_kit as W

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def web_dist():
    if W.node() is None:
        pytest.skip("no node on PATH: the JS runtime's tests need Node 18+ and npm (make web-install)")
    return W.build_bundle()


@pytest.fixture(scope="session")
def web_models(tmp_path_factory):
    """{kind: .onnx}: every task type and long-text policy in fp32, and the int8 files of the graphs."""
    folder = tmp_path_factory.mktemp("web_models")
    models = W.export_models(folder)
    return {**models, **W.int8_models(folder, models), **bag_models(folder)}


def bag_models(folder):
    """{bag_of_terms: .onnx, bag_of_terms_int8: .onnx}: the model a run ships when its encoder adds
    nothing (tfm_cls.model.bag: ids -> hashed TF-IDF bag of terms and pairs -> one product), as
    `tfm-cls export` writes it (max_length from the tokenizer: the runtime cuts longer texts there,
    although the graph has no positions) and its int8 file as `tfm-cls quantize` makes it (int8
    tables, one scale a row). Its tokens' character grams counted as runs on word pieces count them. Random weights and IDF (a third of the terms 0: never seen in
    training) and a temperature, serve_kit's tokenizer: no training, a second or two."""
    import torch
    from kits import serve_kit as K
    from tfm_cls.export.exporter import export_classifier
    from tfm_cls.export.quantize import quantize_model

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.char_grams import char_gram_table
    from tfm_cls.data.tokenizer import marker_ids, train_tokenizer
    from tfm_cls.model import BagOfTermsClassifier

    tok = train_tokenizer(K.TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=K.MAX_LENGTH))
    torch.manual_seed(5)
    # as runs ship it: [CLS] / [SEP] not counted (one more comparison in the graph's keep mask), each word
    # piece's character grams looked up by id (the character view: a Gather of an int32 table)
    table, char_rows = char_gram_table(tok, skip_ids=marker_ids(tok))
    bag = BagOfTermsClassifier(tok.get_vocab_size(), len(K.LABELS), 0, max_len=K.MAX_LENGTH, wide_weighting="tfidf",
                               wide_ngrams=2, wide_buckets=512, wide_skip_ids=marker_ids(tok),
                               wide_char_rows=char_rows, wide_char_slots=table.shape[1]).eval()
    bag.wide.set_char_grams(torch.from_numpy(table))
    with torch.no_grad():
        bag.wide.weight.normal_()
        idf = 1.0 + 3.0 * torch.rand(bag.wide.rows)
        bag.wide.set_idf(torch.where(torch.rand(bag.wide.rows) < 0.3, torch.zeros_like(idf), idf))
        bag.bias.normal_()
    fp32 = export_classifier(bag, folder / "bag_of_terms.onnx", tokenizer=tok, labels=K.LABELS,
                             max_length=K.MAX_LENGTH, temperature=0.5)
    return {"bag_of_terms": fp32,
            "bag_of_terms_int8": quantize_model(fp32, folder / "bag_of_terms.int8.onnx", embeddings=True)}


@pytest.fixture(scope="session")
def bad_models(web_models, tmp_path_factory):
    return W.bad_models(tmp_path_factory.mktemp("web_bad"), web_models["single_label"])


@pytest.fixture(scope="session")
def expected(web_models, tmp_path_factory):
    """{kind: (records, rows of tfm-cls infer)}."""
    folder = tmp_path_factory.mktemp("web_expected")
    out = {}
    for kind, path in web_models.items():
        records = W.inputs_of(kind)
        out[kind] = (records, W.python_rows(path, records, folder))
    return out


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium (apt-get install -y chromium) for the browser tests")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=30_000)
        yield b
        b.close()

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
    return {**models, **W.int8_models(folder, models)}


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

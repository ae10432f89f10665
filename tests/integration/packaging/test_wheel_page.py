"""The page from any install: the wheel carries the built browser bundle, and a fresh virtual
environment outside the repository holding the wheel and the base dependencies only (no torch, no
Node, no checkout, no $TFM_CLS_WEB_DIST) writes the page with `tfm-cls web`; Chromium loads it and its
rows equal `tfm-cls infer`'s, run in that same environment, on a few texts.

The base dependencies come from this test environment (no network): the fresh venv sees only them,
through a .pth file naming a folder of links to those distributions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BASE = ("numpy", "onnxruntime", "tokenizers", "tqdm")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
TEXTS = ["the film was wonderful", "a dull and boring match", "", "stocks fell sharply today " * 40, "ünïcödé 😀 text"]


def test_the_wheel_carries_the_page(built_wheel):
    if not built_wheel.with_page:
        pytest.skip("web/dist is not built and cannot be here (no npm / node_modules): make web-install")
    with zipfile.ZipFile(built_wheel.path) as zf:
        names = set(zf.namelist())
        from tfm_cls.web_export import BUNDLE_FILES

        assert {f"tfm_cls/web_dist/{n}" for n in (*BUNDLE_FILES, "build.json")} <= names
        for name in BUNDLE_FILES:
            assert zf.read(f"tfm_cls/web_dist/{name}") == (ROOT / "web" / "dist" / name).read_bytes()
        assert zf.getinfo("tfm_cls/web_dist/ort-wasm-simd-threaded.wasm").file_size > 5 * 2**20  # most of it


def _closure(names) -> set[str]:
    """The distributions `names` need, their own requirements followed (markers evaluated, no extras)."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _linked_site(folder: Path) -> Path:
    """A folder of links to the base dependencies' installed files (packages and .dist-info)."""
    folder.mkdir()
    for name in _closure(BASE):
        dist = metadata.distribution(name)
        site = Path(dist.locate_file(""))
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            if top.endswith(".pth") or top == "__pycache__" or not (site / top).exists():
                continue
            if not (folder / top).exists():
                (folder / top).symlink_to(site / top)
    return folder


@pytest.fixture(scope="module")
def fresh_venv(built_wheel, tmp_path_factory):
    if not built_wheel.with_page:
        pytest.skip("the wheel was built without the page (no npm / node_modules here)")
    root = tmp_path_factory.mktemp("fresh")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "base_dependencies.pth").write_text(str(_linked_site(root / "base")) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(built_wheel.path)], check=True, capture_output=True, timeout=300)
    home = root / "home"
    home.mkdir()
    # outside the repository, nothing of it on any path, no node on PATH, no bundle given by the environment
    env = {"PATH": str(venv / "bin"), "HOME": str(home), "LANG": "C.UTF-8", "ORT_DISABLE_TELEMETRY": "1"}
    return venv, env, root


def run(venv, env, cwd, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "tfm-cls"), *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=180)


def test_a_fresh_venv_with_the_wheel_writes_the_page_that_chromium_runs(fresh_venv, tmp_path):
    venv, env, root = fresh_venv
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import tfm_cls, importlib.util as u; "
                            "print(tfm_cls.__file__, u.find_spec('torch'), u.find_spec('sklearn'))"],
                           cwd=root, env=env, capture_output=True, text=True, timeout=60)
    where, torch, sklearn = probe.stdout.split()
    assert where.startswith(str(venv)) and torch == "None" and sklearn == "None", probe.stdout + probe.stderr
    assert shutil.which("node", path=env["PATH"]) is None

    from kits import serve_kit as K
    from kits import web_kit as W
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.tokenizer import train_tokenizer

    tok = train_tokenizer(K.TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=K.MAX_LENGTH))
    model = export_classifier(K.tiny(3, tok.get_vocab_size()), root / "model.onnx", tokenizer=tok, labels=K.LABELS,
                              max_length=K.MAX_LENGTH)
    done = run(venv, env, root, "web", "model.onnx", "site")
    assert done.returncode == 0, done.stderr
    site = root / "site"
    assert (site / "model.onnx").read_bytes() == model.read_bytes() and (site / "ort-wasm-simd-threaded.wasm").is_file()
    (root / "texts.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS),
                                      encoding="utf-8")
    done = run(venv, env, root, "infer", "--model", "model.onnx", "--input", "texts.jsonl", "--output", "rows.jsonl")
    assert done.returncode == 0, done.stderr
    infer_rows = [json.loads(line) for line in (root / "rows.jsonl").read_text(encoding="utf-8").split("\n") if line]
    assert len(infer_rows) == len(TEXTS)

    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium (apt-get install -y chromium) to load the page")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    url, server = W.serve_folder(site)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, timeout=30_000)
            try:
                page = browser.new_page()
                page.goto(url, timeout=20_000)
                page.wait_for_selector("#go:not([disabled])", timeout=30_000)
                rows = page.evaluate("texts => window.tfmCls.classify(texts)", TEXTS)
                page.fill("#text", TEXTS[0])
                page.click("#go")
                page.wait_for_selector("#results:not([hidden])", timeout=10_000)
                shown = page.locator("#results .top .name").all_text_contents()
            finally:
                browser.close()
    finally:
        server.shutdown()
    assert W.differences(rows, infer_rows, W.TOLERANCE) == []
    assert shown == [infer_rows[0]["label"]]

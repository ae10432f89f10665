"""`tfm-cls export --web DIR`: a static folder that runs an export in the browser, offline.

The folder holds the page (index.html, page.js), the worker that runs the model off the page's
main thread (tfm-cls-worker.js: the JS runtime of web/, bundled), the runtime as one ES module
for pages of one's own (tfm-cls.js), onnxruntime-web's WebAssembly binary and the model itself
(model.onnx). Every file comes from the folder: any static file server serves it, offline.

The JavaScript is built from the pinned npm packages of web/ (`make web-install`: npm ci and
esbuild into web/dist/); this module only copies what that build wrote, so it needs no Node.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from tfm_cls.errors import InferenceError

logger = logging.getLogger("tfm_cls.web")

# What web/build.mjs writes; the folder is complete only with every one of them.
BUNDLE_FILES = ("index.html", "page.js", "tfm-cls-worker.js", "tfm-cls.js", "ort-wasm-simd-threaded.wasm")
MODEL_FILE = "model.onnx"
SERVING_NOTES = "SERVING.txt"
# The headers a server must send: WebAssembly compiles while it downloads only as application/wasm.
MIME_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
              ".wasm": "application/wasm", ".onnx": "application/octet-stream"}
ENV_DIST = "TFM_CLS_WEB_DIST"


def bundle_dir() -> Path:
    """web/dist of the tfm_cls checkout (or $TFM_CLS_WEB_DIST); InferenceError saying how to build
    it where it is missing or incomplete."""
    given = os.environ.get(ENV_DIST)
    folder = Path(given) if given else Path(__file__).resolve().parents[1] / "web" / "dist"
    missing = [name for name in BUNDLE_FILES if not (folder / name).is_file()]
    if missing:
        raise InferenceError(
            f"the browser runtime is not built ({folder} lacks {missing}): run `make web-install` in the tfm_cls "
            f"repository (Node 18+ and npm: npm ci and the esbuild bundle into web/dist/), or point ${ENV_DIST} at "
            "such a folder")
    return folder


def web_model(run_dir: str | Path, fp32: str | Path) -> Path:
    """The file the page should run: RUN/model.int8.onnx where `tfm-cls quantize` wrote one that
    passed its gate and comes from the same weights as `fp32`, else `fp32`."""
    int8 = Path(run_dir) / "model.int8.onnx"
    report = int8.with_name(int8.stem + ".quantization.json")
    if not (int8.is_file() and report.is_file()):
        return Path(fp32)
    try:
        accepted = bool(json.loads(report.read_text(encoding="utf-8")).get("accepted"))
    except (OSError, ValueError):
        return Path(fp32)
    if accepted and _weights_digest(int8) == _weights_digest(Path(fp32)):
        return int8
    return Path(fp32)


def _weights_digest(path: Path) -> str | None:
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return props.get("tfm_cls.weights_sha256")


def write_web_folder(model: str | Path, folder: str | Path, dist: str | Path | None = None) -> Path:
    """Write the static page of the .onnx `model` into `folder` (created; the files it writes are
    replaced, others left alone) and return the folder."""
    model, folder = Path(model), Path(folder)
    source = Path(dist) if dist else bundle_dir()
    if not model.is_file():
        raise InferenceError(f"model file not found: {model}")
    folder.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:
        _copy(source / name, folder / name)
    _copy(model, folder / MODEL_FILE)
    (folder / SERVING_NOTES).write_text(serving_notes(), encoding="utf-8")
    size = sum((folder / n).stat().st_size for n in (*BUNDLE_FILES, MODEL_FILE))
    logger.info("wrote the page of %s to %s (%.1f MB); serve it with any static server, e.g. "
                "python -m http.server -d %s, and open http://127.0.0.1:8000/", model, folder, size / 2**20, folder)
    return folder


def _copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.partial")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def serving_notes() -> str:
    types = "\n".join(f"  {ext:<7} {mime}" for ext, mime in MIME_TYPES.items())
    return f"""This folder is a static web page that classifies texts with {MODEL_FILE}, in the browser.
Nothing is fetched from anywhere but this folder, and no text leaves the page.

Serve it with any static file server, for example:
  python -m http.server -d . 8000      then open http://127.0.0.1:8000/
(Opening index.html as a file:// URL does not work: browsers refuse module workers there.)

Content types the server must send:
{types}
No other header is needed: the model runs on one WebAssembly thread, so the page does not need
cross-origin isolation (COOP / COEP headers). Compressing responses (gzip or brotli) cuts the
download about four times; the .wasm file is most of it.

The page's API, for scripts: window.tfmCls.ready (the model's facts), window.tfmCls.classify(texts)
(the rows `tfm-cls infer` writes). tfm-cls.js is the runtime as one ES module for pages of your own:
  import {{ load }} from "./tfm-cls.js";
  const clf = await load("model.onnx");
  const rows = await clf.classify(["a text"]);
"""

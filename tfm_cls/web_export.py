"""`tfm-cls export --web DIR`: a static folder that runs an export in the browser, offline.

The folder holds the page (index.html, page.js), the worker that runs the model off the page's
main thread (tfm-cls-worker.js: the JS runtime of web/, bundled), the runtime as one ES module
for pages of one's own (tfm-cls.js), onnxruntime-web's WebAssembly binary and the model itself
(model.onnx). Every file comes from the folder: any static file server serves it, offline.

The JavaScript is built from the pinned npm packages of web/ (`make web-install`: npm ci and
esbuild into web/dist/); a wheel carries that build as tfm_cls/web_dist (setup.py builds it from the
lockfile at wheel build). This module only copies what the build wrote: it needs no Node, and no
torch (the model is checked with onnxruntime), so `tfm-cls web MODEL.onnx DIR` runs on the base install.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from tfm_cls.errors import InferenceError
from tfm_cls.io import atomic_path, write_text

logger = logging.getLogger("tfm_cls.web")

# What web/build.mjs writes; the folder is complete only with every one of them.
BUNDLE_FILES = ("index.html", "page.js", "tfm-cls-worker.js", "tfm-cls.js", "ort-wasm-simd-threaded.wasm")
MODEL_FILE = "model.onnx"
SERVING_NOTES = "SERVING.txt"
# The headers a server must send: WebAssembly compiles while it downloads only as application/wasm.
MIME_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
              ".wasm": "application/wasm", ".onnx": "application/octet-stream"}
ENV_DIST = "TFM_CLS_WEB_DIST"


PACKAGED_DIST = Path(__file__).resolve().parent / "web_dist"
"""Where a wheel carries the built bundle (setup.py builds web/ from its lockfile into it at wheel build)."""
CHECKOUT_DIST = Path(__file__).resolve().parents[1] / "web" / "dist"


def bundle_dir() -> Path:
    """The built bundle: $TFM_CLS_WEB_DIST where set, else the one the installed wheel carries
    (tfm_cls/web_dist), else web/dist of a tfm_cls checkout (`make web-install`); InferenceError
    saying how to build it where none is complete."""
    given = os.environ.get(ENV_DIST)
    if given:
        candidates = [Path(given)]
    else:
        candidates = [PACKAGED_DIST, CHECKOUT_DIST]
    for folder in candidates:
        if all((folder / name).is_file() for name in BUNDLE_FILES):
            return folder
    folder = candidates[-1]
    missing = [name for name in BUNDLE_FILES if not (folder / name).is_file()]
    raise InferenceError(
        f"the browser runtime is not built ({folder} lacks {missing}): install tfm-cls from a wheel (it carries "
        f"the page), run `make web-install` in the tfm_cls repository (Node 18+ and npm: npm ci and the esbuild "
        f"bundle into web/dist/), or point ${ENV_DIST} at such a folder")


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
    """The weights digest an export records (onnxruntime reads the metadata: no onnx, no torch)."""
    from tfm_cls.runtime.metadata import read_props
    from tfm_cls.runtime.session import make_session

    return read_props(make_session(str(path))).get("tfm_cls.weights_sha256")


def check_model(model: str | Path) -> None:
    """A tfm_cls classifier export whose metadata fits its graph (the runtime's own checks,
    torch-free), else an InferenceError saying what it is."""
    from tfm_cls.runtime.session import classifier_metadata, make_session

    classifier_metadata(make_session(str(model)), str(model))


def check_web_folder(folder: str | Path, model: str | Path, run: str | Path | None = None) -> None:
    """Refuse, before anything is exported or written (InputError), a page folder that is a file, the
    run itself, or whose files would overwrite the model or a file of the run."""
    from tfm_cls.errors import InputError
    from tfm_cls.io import output_clash

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--web {folder} is a file, not a folder; give a folder for the page (it is created), "
                         "or remove the file")
    if run is not None and Path(os.path.realpath(folder)) == Path(os.path.realpath(run)):
        raise InputError(f"--web {folder} is the run folder {run}; give a folder of its own for the page (e.g. "
                         f"{Path(run) / 'web'})")
    inputs: dict[str, tuple[str | Path, frozenset[str] | None]] = {"the model": (model, None)}
    if run is not None and Path(run).is_dir():
        inputs["the run"] = (run, frozenset(p.name for p in Path(run).iterdir()))
    for name in (*BUNDLE_FILES, MODEL_FILE, SERVING_NOTES):
        if (folder / name).is_dir():
            raise InputError(f"--web {folder}: {folder / name} is a folder; the page writes a file there")
        clash = output_clash(folder / name, inputs)
        if clash:
            raise InputError(f"--web {folder}: {clash}; writing the page there would overwrite it, so nothing was "
                             "exported or written: give another folder")


def write_web_folder(model: str | Path, folder: str | Path, dist: str | Path | None = None) -> Path:
    """Write the static page of the .onnx `model` into `folder` (created; the files it writes are
    replaced, others left alone) and return the folder."""
    model, folder = Path(model), Path(folder)
    source = Path(dist) if dist else bundle_dir()
    if not model.is_file():
        raise InferenceError(f"model file not found: {model}")
    check_web_folder(folder, model)
    check_model(model)  # a file the page could not run is refused here, not in the user's browser
    folder.mkdir(parents=True, exist_ok=True)
    for name in BUNDLE_FILES:
        _copy(source / name, folder / name)
    _copy(model, folder / MODEL_FILE)
    write_text(folder / SERVING_NOTES, serving_notes())
    size = sum((folder / n).stat().st_size for n in (*BUNDLE_FILES, MODEL_FILE))
    logger.info("wrote the page of %s to %s (%.1f MB); serve it with any static server, e.g. "
                "python -m http.server -d %s, and open http://127.0.0.1:8000/", model, folder, size / 2**20, folder)
    return folder


def _copy(src: Path, dst: Path) -> None:
    with atomic_path(dst) as tmp:  # a temporary file beside it, renamed over it
        shutil.copyfile(src, tmp)


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

"""What the browser-runtime tests share (tests/integration/web): the JS bundle built once, tiny
exports of every task type and long-text policy, the texts (hostile ones included), the rows of
`tfm-cls infer` (tfm_cls.runtime.stream.classify_file, the command's own code) and a comparison
that says which row and field differ."""

from __future__ import annotations

import functools
import http.server
import json
import math
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import onnx

from kits import serve_kit as K
from tfm_cls.runtime.text import LongText

WEB = Path(__file__).resolve().parents[2] / "web"
TOLERANCE = 1e-5  # fp32: onnxruntime-web's WASM kernels against native onnxruntime
# int8: MatMulInteger in the browser is exact integer arithmetic; native onnxruntime on AVX2 hosts
# saturates u8 x s8 pairs (docs/export.md "In the browser"), so scores may move by a few hundredths.
INT8_TOLERANCE = 0.05

HOSTILE = [
    "", "   \t ", "\x1c\x1d\x1e\x1f", "\x85", "\u3000\u00a0", "\ufeff", "a\x00b\x07c\x1bd", "tab\tand\r\nnewline",
    "😀🥹 what a film 👍🏽👨‍👩‍👧", "漢字かなカナ한국어 映画", "ΣΟΦΟΣ ΟΔΟΣ σοφος", "Ünïcödé ÀÉÎÕÜ ﬁ Ⅻ ①",
    "[CLS] the film [SEP] was [PAD] fine [MASK]", "[cls] lower [UNK]", "\u0378\U000e0001 unassigned",
    "the film " * 11_111 + "x",  # 100,000 characters
    "a" * 100_000,  # one 100,000-character word
]
TEXTS = [*K.TEXTS, *HOSTILE]
PAIRS = [*K.PAIRS, *(K.PAIRS[i % len(K.PAIRS)] for i in range(len(HOSTILE)))]


def node() -> str | None:
    return shutil.which("node")


def build_bundle() -> Path:
    """web/dist, built from the pinned packages (npm ci where web/node_modules is missing)."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the browser runtime cannot be built (make web-install)")
    if not (WEB / "node_modules" / ".package-lock.json").is_file():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(WEB)], check=True, capture_output=True,
                       timeout=300)
    sources = [p for d in ("src", "page") for p in (WEB / d).iterdir()] + [WEB / "build.mjs"]
    dist = WEB / "dist"
    built = [dist / n for n in ("index.html", "page.js", "tfm-cls-worker.js", "tfm-cls.js", "ort-wasm-simd-threaded.wasm")]
    if not all(p.is_file() for p in built) or max(p.stat().st_mtime for p in sources) > min(p.stat().st_mtime for p in built):
        subprocess.run([npm, "run", "build", "--prefix", str(WEB)], check=True, capture_output=True, timeout=120)
    return dist


def with_props(src: Path, dst: Path, changes: dict[str, str | None]) -> Path:
    """A copy of an export with metadata values replaced (None: removed)."""
    model = onnx.load(str(src))
    props = {p.key: p.value for p in model.metadata_props}
    props.update(changes)
    del model.metadata_props[:]
    onnx.helper.set_model_props(model, {k: v for k, v in props.items() if v is not None})
    onnx.save(model, str(dst))
    return dst


def export_models(folder: Path) -> dict[str, Path]:
    """{kind: .onnx}: three graphs (single-label, multi-label with thresholds, a sentence-pair
    regression), and copies of the single-label one whose metadata chunk (mean of logits; max of
    probabilities with a temperature), or cut head+tail or tail (the runtime reads those from the
    metadata, so no other graph is needed). Random weights, serve_kit's tiny shapes."""
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.tokenizer import train_tokenizer
    from tfm_cls.runtime.heads import MultiLabel, Regression

    tok = train_tokenizer(K.TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=K.MAX_LENGTH))
    vocab = tok.get_vocab_size()

    def export(name, model, labels, **kw):
        return export_classifier(model, folder / f"{name}.onnx", tokenizer=tok, labels=labels, max_length=K.MAX_LENGTH,
                                 **kw)

    single = export("single_label", K.tiny(3, vocab), K.LABELS)
    models = {
        "single_label": single,
        "multi_label": export("multi_label", K.tiny(4, vocab, seed=1), K.ML_LABELS,
                              head=MultiLabel(thresholds=np.array([0.5, 0.45, 0.55, 0.5]))),
        "regression": export("regression", K.tiny(1, vocab, type_vocab_size=2, seed=4), ["score"], head=Regression(),
                             pair=True),
    }
    variants = {
        "chunked": {"tfm_cls.max_length": "10", "tfm_cls.long_text": LongText(chunk=True, stride=2).to_json()},
        "chunked_max": {"tfm_cls.max_length": "10", "tfm_cls.temperature": "1.7",
                        "tfm_cls.long_text": LongText(chunk=True, aggregate="max", scores="probabilities").to_json()},
        "head_tail": {"tfm_cls.max_length": "12", "tfm_cls.long_text": LongText(truncation="head+tail").to_json()},
        "tail": {"tfm_cls.max_length": "12", "tfm_cls.long_text": LongText(truncation="tail").to_json()},
    }  # head+tail at 12: 10 text tokens, round(10 * 0.25) = 2 (Python's round, half to even)
    for name, changes in variants.items():
        models[name] = with_props(single, folder / f"{name}.onnx", changes)
    return models


def int8_models(folder: Path, models: dict[str, Path]) -> dict[str, Path]:
    """{kind: int8 .onnx} of the three graphs, as `tfm-cls quantize` makes them by default (int8
    weights and int8 embedding tables)."""
    from tfm_cls.export.quantize import quantize_model

    return {f"{kind}_int8": quantize_model(models[kind], folder / f"{kind}.int8.onnx", embeddings=True)
            for kind in ("single_label", "multi_label", "regression")}


def bad_models(folder: Path, single: Path) -> dict[str, Path]:
    """Files the runtime must refuse: not a tfm_cls model, truncated, metadata that does not fit the graph."""
    data = single.read_bytes()
    truncated = folder / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    return {
        "not_ours": with_props(single, folder / "not_ours.onnx", {"tfm_cls.format": None}),
        "truncated": truncated,
        "mismatch": with_props(single, folder / "mismatch.onnx", {"tfm_cls.labels": '["only", "two"]'}),
    }


def inputs_of(kind: str) -> list[dict]:
    """The JSONL records both runtimes classify (the pair models get a second text each)."""
    pair = kind.startswith("regression")
    return [{"text": t, **({"text_pair": p} if pair else {})} for t, p in zip(TEXTS, PAIRS)]


def python_rows(model: Path, records: list[dict], folder: Path, **options) -> list[dict]:
    """`tfm-cls infer`'s rows: its own code (classify_file), in this process; `options`: its
    keyword arguments (max_length, long_text: the --max-length, --truncation, --chunk ... flags)."""
    from tfm_cls.runtime.stream import classify_file

    stem = f"{model.stem}-{len(options)}"
    src, dst = folder / f"{stem}.in.jsonl", folder / f"{stem}.py.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    classify_file(str(model), str(src), str(dst), progress=False, **options)
    return [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]


def differences(js: list[dict], py: list[dict], tolerance: float = TOLERANCE) -> list[str]:
    """Where JS rows differ from Python's: any label, flag or key; a score beyond `tolerance`."""
    out = []
    if len(js) != len(py):
        return [f"{len(js)} rows from JS, {len(py)} from Python"]
    for i, (a, b) in enumerate(zip(js, py)):
        if list(a) != list(b):
            out.append(f"row {i}: keys {list(a)} != {list(b)}")
            continue
        for key in b:
            x, y = a[key], b[key]
            if key in ("score", "value") and x is not None and y is not None:
                ok = math.isclose(x, y, rel_tol=0, abs_tol=tolerance)
            elif key == "scores" and x is not None and y is not None:
                ok = len(x) == len(y) and all(math.isclose(p, q, abs_tol=tolerance) for p, q in zip(x, y))
            elif key == "probabilities" and x is not None and y is not None:
                ok = list(x) == list(y) and all(math.isclose(x[k], y[k], abs_tol=tolerance) for k in y)
            else:
                ok = x == y
            if not ok:
                out.append(f"row {i} ({TEXTS[i][:30]!r}): {key} {x!r} (JS) != {y!r} (Python)")
    return out


def serve_folder(root: Path):
    """A static server of `root` on 127.0.0.1 (a free port), in a thread; returns (url, server)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/", srv

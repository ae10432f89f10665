"""Tiny exported models of every kind the service runs, and helpers the serve tests share."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from tfm_cls.model import TransformerClassifier

LABELS = ["alpha", "beta", "gamma"]
ML_LABELS = ["red", "green", "blue", "gold"]
MAX_LENGTH = 24
CHUNK_LENGTH = 10  # the chunked model: a short window, so ordinary texts have several
_WORDS = ("the film was a quiet delight with sharp writing and warm performances but the plot drags in the "
          "middle and the ending feels rushed although the music is lovely").split()
TEXTS = [" ".join(_WORDS[(i * 7) % len(_WORDS):] + _WORDS[: (i * 3) % len(_WORDS)])[: 8 + 9 * i] for i in range(40)]
PAIRS = [TEXTS[(i * 5 + 3) % len(TEXTS)] for i in range(len(TEXTS))]


def tiny(num_classes: int, vocab_size: int, type_vocab_size: int = 0, seed: int = 0) -> TransformerClassifier:
    torch.manual_seed(seed)
    return TransformerClassifier(vocab_size=vocab_size, num_classes=num_classes, d_model=16, nhead=4, num_layers=2,
                                 dim_feedforward=32, dropout=0.0, max_len=48, type_vocab_size=type_vocab_size).eval()


def export_models(folder: Path, regression: bool = False) -> dict[str, Path]:
    """{kind: model.onnx} for single_label, multi_label, pair, chunked (and regression) models, random weights."""
    from tfm_cls.export.exporter import export_classifier

    from tfm_cls.config import TokenizerConfig
    from tfm_cls.data.tokenizer import train_tokenizer
    from tfm_cls.runtime.heads import MultiLabel, Regression
    from tfm_cls.runtime.text import LongText

    tok = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=MAX_LENGTH))
    vocab = tok.get_vocab_size()
    out = {}

    def export(name, model, labels, **kw):
        out[name] = export_classifier(model, folder / f"{name}.onnx", tokenizer=tok, labels=labels,
                                      max_length=kw.pop("max_length", MAX_LENGTH), **kw)

    export("single_label", tiny(3, vocab), LABELS)
    export("multi_label", tiny(4, vocab, seed=1), ML_LABELS,
           head=MultiLabel(thresholds=np.array([0.5, 0.45, 0.55, 0.5])))
    export("pair", tiny(3, vocab, type_vocab_size=2, seed=2), LABELS, pair=True)
    if regression:
        export("regression", tiny(1, vocab, type_vocab_size=2, seed=4), ["score"], head=Regression(), pair=True)
    # Chunking is metadata only (the long-text policy and the length): the single-label graph with
    # other metadata, rather than a fourth export (seconds each).
    out["chunked"] = with_metadata(out["single_label"], folder / "chunked.onnx", {
        "tfm_cls.max_length": str(CHUNK_LENGTH), "tfm_cls.long_text": LongText(chunk=True, stride=2).to_json()})
    return out


def with_metadata(src: Path, dst: Path, changes: dict[str, str]) -> Path:
    """A copy of an export with some metadata values replaced."""
    import onnx

    model = onnx.load(str(src))
    props = {p.key: p.value for p in model.metadata_props}
    onnx.helper.set_model_props(model, {**props, **changes})
    onnx.save(model, str(dst))
    return dst


def infer_rows(model: Path, texts: list[str], pairs: list[str] | None, tmp: Path) -> list[dict]:
    """`tfm-cls infer`'s JSONL rows of `texts` (with `pairs`), run as the command line."""
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t, **({"text_pair": p} if pairs else {})}) + "\n"
                           for t, p in zip(texts, pairs or texts)), encoding="utf-8")
    dst = tmp / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "tfm_cls.cli", "infer", "--model", str(model), "--input", str(src),
                           "--output", str(dst), "--no-progress"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in dst.read_text(encoding="utf-8").splitlines()]


def open_client(model, **settings):
    """A Starlette TestClient over a fresh app, entered (lifespan run) and ready."""
    from starlette.testclient import TestClient

    from tfm_cls.serve.app import create_app
    from tfm_cls.serve.settings import ServeSettings

    client = TestClient(create_app(ServeSettings(model=str(model), threads=1, **settings)),
                        raise_server_exceptions=False)
    client.__enter__()
    deadline = time.monotonic() + 30
    while client.get("/health").status_code != 200:
        assert time.monotonic() < deadline, client.get("/health").json()
        time.sleep(0.01)
    return client

"""A converted checkpoint exports, verifies and serves torch-free like any trained classifier,
with the checkpoint's own tokenizer travelling inside the .onnx file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from kits.hf_tiny import save_tiny

from tfm_cls.config import ModelConfig
from tfm_cls.init_from.hf import classifier_from_hf

export = pytest.importorskip("export.exporter", reason="the ONNX exporter (export/) is not part of this install")
from tfm_cls.export.verify import verify  # noqa: E402

from tfm_cls.runtime.session import Classifier  # noqa: E402

LABELS = ["neg", "neu", "pos"]
TEXTS = ["The movie was great!", "bad", "What a plot? Not good, the actors were terrible.", "who"]


@pytest.mark.parametrize("model_type, pooling", [("bert", "mean"), pytest.param("roberta", "cls", marks=pytest.mark.slow)])
def test_converted_model_exports_verifies_and_infers(tmp_path: Path, model_type: str, pooling: str) -> None:
    folder = save_tiny(tmp_path / "m", model_type)
    model, tokenizer = classifier_from_hf(str(folder), ModelConfig(pooling=pooling, max_len=24), num_classes=3)
    torch.manual_seed(0)
    torch.nn.init.normal_(model.head.weight, std=1.0)  # a head that separates, so probabilities differ
    model.eval()
    path = export.export_classifier(model, tmp_path / "model.onnx", tokenizer=tokenizer, labels=LABELS)

    assert verify(model, path).ok

    # torch-free inference: the file's tokenizer is the checkpoint's, padding with its pad id
    probs, truncated = Classifier(str(path)).predict_proba(TEXTS)
    encodings = tokenizer.encode_batch(TEXTS)
    ids = torch.tensor([e.ids for e in encodings])  # [B, T], padded with the checkpoint's pad id
    mask = torch.tensor([e.attention_mask for e in encodings])  # [B, T]
    with torch.no_grad():
        expected = model(ids, mask).softmax(-1).numpy()  # [B, C]
    np.testing.assert_allclose(probs, expected, atol=1e-4)
    assert not any(truncated)

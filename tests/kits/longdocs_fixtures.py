"""Fixtures of the long-document tests: a tiny tokenizer and classifier, a LoadedRun around them
and ONNX exports of it with a chunking policy in the metadata (exported once per session).
Not a conftest: tests/integration/longdocs/conftest.py imports them, and so does
tests/unit/runtime/test_text.py (module-level, so they win over the export fixtures of that
folder's conftest)."""

from __future__ import annotations

import pytest
import torch
from tfm_cls.export.exporter import export_classifier

from kits.longdocs_kit import LABELS, MAX_LENGTH, TEXTS, make_run
from tfm_cls.config import TokenizerConfig
from tfm_cls.data.tokenizer import long_text_of, train_tokenizer
from tfm_cls.model import TransformerClassifier


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(TEXTS, TokenizerConfig(vocab_size=100, min_frequency=1, max_length=MAX_LENGTH))


@pytest.fixture(scope="session")
def model(tokenizer):
    torch.manual_seed(0)
    return TransformerClassifier(
        vocab_size=tokenizer.get_vocab_size(), num_classes=len(LABELS), d_model=16, nhead=4, num_layers=2,
        dim_feedforward=32, dropout=0.0, max_len=64,
    ).eval()


@pytest.fixture(scope="session")
def chunked_onnx(model, tokenizer, tmp_path_factory):
    """An export whose metadata says: chunk, stride 3, mean of logits."""
    path = tmp_path_factory.mktemp("chunked") / "model.onnx"
    run = make_run(model, tokenizer, chunk=True, stride=3)
    policy = long_text_of(run.config.tokenizer, run.config.inference)
    export_classifier(model, path, tokenizer=tokenizer, labels=LABELS, max_length=MAX_LENGTH,
                      long_text=policy)
    return path

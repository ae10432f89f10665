"""Tiny models and texts shared by the export tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import torch

from tfm_cls.model import TransformerClassifier

LABELS = ["alpha", "beta", "gamma"]
MAX_LENGTH = 24  # tokenizer truncation; the models' max_len (position table) is larger

_WORDS = (
    "the film was a quiet delight with sharp writing and warm performances but the plot "
    "drags in the middle and the ending feels rushed although the music is lovely"
).split()
TEXTS = [" ".join(_WORDS[(i * 7) % len(_WORDS) :] + _WORDS[: (i * 3) % len(_WORDS)]) for i in range(60)]


def tiny_classifier(pooling: str = "mean", norm_first: bool = True, vocab_size: int = 120, seed: int = 0):
    torch.manual_seed(seed)
    return TransformerClassifier(
        vocab_size=vocab_size,
        num_classes=len(LABELS),
        d_model=16,
        nhead=4,
        num_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        max_len=48,
        pooling=pooling,
        norm_first=norm_first,
    ).eval()

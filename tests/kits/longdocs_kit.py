"""Texts of the long-document tests: a tiny vocabulary, short texts and texts many windows long."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from tfm_cls.config import ClassifierConfig, InferenceConfig, TokenizerConfig
from tfm_cls.runs import LoadedRun

LABELS = ["alpha", "beta", "gamma"]
MAX_LENGTH = 12  # 10 text tokens + [CLS] + [SEP] per row

WORDS = ("cat dog sun rain tree bird fish moon star rock leaf wind snow fire lake hill road ship gold salt").split()


def texts(n: int, seed: int, low: int = 1, high: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) for _ in range(n)]


TEXTS = [" ".join(WORDS)] * 3 + texts(40, 0)


def make_run(model, tokenizer, **keys) -> LoadedRun:
    """A run of the tiny model; `keys` are TokenizerConfig's or InferenceConfig's (chunk, stride, ...)."""
    inference = {f.name for f in dataclasses.fields(InferenceConfig)}
    tokenizer_keys = {k: v for k, v in keys.items() if k not in inference}
    cfg = ClassifierConfig(
        tokenizer=TokenizerConfig(vocab_size=100, max_length=MAX_LENGTH, **tokenizer_keys),
        inference=InferenceConfig(**{k: v for k, v in keys.items() if k in inference}),
    )
    return LoadedRun(model=model, tokenizer=tokenizer, labels=LABELS, config=cfg, run_dir=Path("."))

"""Tiny synthetic classification data and a tiny config: every training test runs in seconds."""

import random

from tiny_topics import CLASSES, FILLER, WORDS, write_jsonl  # noqa: F401 (re-exported to the tests)

from tfm_cls.config import ClassifierConfig, load_config


def make_texts(n: int, seed: int) -> list[dict]:
    """Short texts whose class is given away by its topic words (learnable in a few epochs)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % len(CLASSES)
        words = [rng.choice(WORDS[CLASSES[label]]) for _ in range(rng.randint(2, 5))]
        words += [rng.choice(FILLER) for _ in range(rng.randint(1, 6))]
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    return rows


TINY = [
    "name=tiny", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32",
    "model.max_len=32", "model.dropout=0.1",
    "train.epochs=6", "train.batch_size=8", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5",
]


def tiny_overrides(data_dir, run_dir, *extra: str) -> list[str]:
    return [*TINY, f"data.path={data_dir}", f"run_dir={run_dir}", *extra]


def tiny_config(data_dir, run_dir, *extra: str) -> ClassifierConfig:
    return load_config(ClassifierConfig, None, tiny_overrides(data_dir, run_dir, *extra))

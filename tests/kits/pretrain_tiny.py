"""Tiny labelled data and a tiny pretraining config shared by the pretraining tests."""

import random
from pathlib import Path

from kits.tiny_topics import write_dataset
from tfm_cls.config import load_config
from tfm_cls.pretrain import PretrainConfig

NOUNS = "cat dog bird horse fish mouse".split()
VERBS = "sees chases likes follows".split()
PLACES = "garden house river forest".split()


def write_tiny_dataset(folder: Path, seed: int = 0, n_train: int = 240) -> Path:
    """Sentences from a small grammar (learnable by MLM), labels = whether a cat is mentioned."""
    rng = random.Random(seed)

    def row() -> dict:
        a, b = rng.choice(NOUNS), rng.choice(NOUNS)
        return {"text": f"the {a} {rng.choice(VERBS)} the {b} in the {rng.choice(PLACES)} .", "label": int("cat" in (a, b))}

    splits = {split: [row() for _ in range(n)] for split, n in (("train", n_train), ("validation", 40), ("test", 40))}
    return write_dataset(folder, splits, ["no_cat", "cat"])


def tiny_overrides(data_dir: Path, run_dir: Path) -> list[str]:
    return [
        f"data.path={data_dir}",
        f"run_dir={run_dir}",
        "tokenizer.vocab_size=100",
        "tokenizer.min_frequency=1",
        "tokenizer.max_length=32",
        "model.d_model=16",
        "model.nhead=4",
        "model.num_layers=2",
        "model.dim_feedforward=32",
        "model.max_len=64",
        "mlm.seq_len=32",
        "train.batch_size=8",
        "train.epochs=10",
        "train.lr=3e-3",
        "train.warmup_steps=5",
        "train.eval_every=20",
        "train.checkpoint_every=10",
        "train.log_every=5",
        "train.progress=false",
        "train.num_threads=1",
        "train.device=cpu",
    ]


def tiny_config(data_dir: Path, run_dir: Path, *extra: str) -> PretrainConfig:
    return load_config(PretrainConfig, None, tiny_overrides(data_dir, run_dir) + list(extra))

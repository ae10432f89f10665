"""A tiny teacher (a from-scratch classification run on synthetic data) and tiny distillation configs."""

import random
from pathlib import Path

from kits.tiny_topics import TINY, tiny_config, write_topic_data
from tfm_cls.config import load_config
from tfm_cls.distill import DistillConfig


def write_data(folder: Path, n_train: int = 120, seed: int = 0) -> Path:
    return write_topic_data(folder, (n_train, 30, 30), seed)


def train_teacher(data: Path, run_dir: Path, *extra: str) -> Path:
    """A finished tiny classification run (d 16, one layer): the teacher of the tests."""
    from tfm_cls.train import train

    train(tiny_config(data, run_dir, "model.d_model=32", "model.dim_feedforward=64", *extra))
    return run_dir


# The tiny classifier's settings, with fewer and larger batches, on a transfer set of 3 copies.
TINY_STUDENT = [
    *TINY, "name=tiny-distill", "train.epochs=2", "train.batch_size=16", "transfer.copies=3", "teacher.chunk_size=64",
]


def distill_config(data: Path, teacher: Path, run_dir: Path, *extra: str) -> DistillConfig:
    overrides = [*TINY_STUDENT, f"data.path={data}", f"teacher.path={teacher}", f"run_dir={run_dir}", *extra]
    return load_config(DistillConfig, None, overrides)


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(["cat", "soup", "golf", "the", "very"]) for _ in range(rng.randint(2, 8))) for _ in range(n)]

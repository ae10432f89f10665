"""A tiny teacher (a from-scratch classification run on synthetic data) and tiny distillation configs."""

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))

from train_tiny import CLASSES, make_texts, tiny_config, write_jsonl  # noqa: E402

from tfm_cls.config import load_config  # noqa: E402
from tfm_cls.distill import DistillConfig  # noqa: E402

__all__ = ["CLASSES", "make_texts", "write_jsonl", "write_data", "train_teacher", "distill_config", "TINY_STUDENT"]


def write_data(folder: Path, n_train: int = 120, seed: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "train.jsonl", make_texts(n_train, seed))
    write_jsonl(folder / "validation.jsonl", make_texts(30, seed + 1))
    write_jsonl(folder / "test.jsonl", make_texts(30, seed + 2))
    (folder / "labels.json").write_text(json.dumps(CLASSES))
    return folder


def train_teacher(data: Path, run_dir: Path, *extra: str) -> Path:
    """A finished tiny classification run (d 16, one layer): the teacher of the tests."""
    from tfm_cls.train import train

    train(tiny_config(data, run_dir, "model.d_model=32", "model.dim_feedforward=64", *extra))
    return run_dir


TINY_STUDENT = [
    "name=tiny-distill", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32",
    "model.max_len=32", "model.dropout=0.1",
    "transfer.copies=3",
    "train.epochs=2", "train.batch_size=16", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5",
    "teacher.chunk_size=64",
]


def distill_config(data: Path, teacher: Path, run_dir: Path, *extra: str) -> DistillConfig:
    overrides = [*TINY_STUDENT, f"data.path={data}", f"teacher.path={teacher}", f"run_dir={run_dir}", *extra]
    return load_config(DistillConfig, None, overrides)


def random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(["cat", "soup", "golf", "the", "very"]) for _ in range(rng.randint(2, 8))) for _ in range(n)]

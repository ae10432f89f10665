"""Tiny data and tiny model settings for the API, TensorBoard, tune and model-card tests."""

import json
import random
from pathlib import Path

from tiny_topics import CLASSES, FILLER, WORDS  # noqa: F401 (re-exported to the tests)

# Dotted overrides of a classifier run that trains in about a second on one CPU thread.
TINY = [
    "name=tiny", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32",
    "model.max_len=32", "model.dropout=0.1",
    "train.epochs=6", "train.batch_size=8", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5",
    "train.device=cpu", "train.max_minutes=null", "train.early_stopping_patience=null",
]


def tiny_kwargs() -> dict:
    """TINY as TextClassifier keyword overrides (`train__lr=0.01`), on top of the trec preset."""
    import yaml

    out = {}
    for item in TINY:
        key, value = item.split("=", 1)
        if key != "name":
            out[key.replace(".", "__")] = yaml.safe_load(value)
    out["train__lr"] = 1e-2
    return out


def make_texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Short texts whose class is given away by its topic words (learnable in a few epochs)."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        label = CLASSES[i % len(CLASSES)]
        words = [rng.choice(WORDS[label]) for _ in range(rng.randint(2, 5))]
        words += [rng.choice(FILLER) for _ in range(rng.randint(1, 6))]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def write_split(path: Path, texts: list[str], labels: list[str]) -> None:
    path.write_text("".join(json.dumps({"text": t, "label": CLASSES.index(y)}) + "\n" for t, y in zip(texts, labels)),
                    encoding="utf-8")


def write_tiny_data(folder: Path, n_test: int = 30) -> Path:
    """train (60) / validation (30) / test (n_test) jsonl and labels.json."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", 60, 0), ("validation", 30, 1), ("test", n_test, 2)):
        write_split(folder / f"{split}.jsonl", *make_texts(n, seed))
    (folder / "labels.json").write_text(json.dumps(CLASSES), encoding="utf-8")
    return folder


def tiny_config(data_dir, run_dir, *extra: str):
    from tfm_cls.config import ClassifierConfig, load_config

    return load_config(ClassifierConfig, None, [*TINY, f"data.path={data_dir}", f"run_dir={run_dir}", *extra])

"""Tiny synthetic data for each task type: multi-label topics, sentence pairs (entailment-like
classes and a similarity score). Learnable in a few epochs of a d_model=16 model."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tiny_topics import CLASSES, FILLER, WORDS, write_jsonl  # noqa: F401 (re-exported to the tests)

TOPICS = CLASSES
PAIR_LABELS = ["same", "different"]

TINY = [
    "name=tiny", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=24",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32",
    "model.max_len=32", "model.dropout=0.0",
    "train.epochs=8", "train.batch_size=8", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5", "train.device=cpu",
]


def _words(rng: random.Random, topics: list[str]) -> str:
    words = [rng.choice(WORDS[t]) for t in topics for _ in range(rng.randint(1, 3))]
    words += [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
    rng.shuffle(words)
    return " ".join(words)


def multi_label_data(folder: Path, as_names: bool = False, sizes=(90, 45, 45)) -> Path:
    """Texts mentioning one or two topics; the labels are those topics (ids, or names)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in zip(("train", "validation", "test"), sizes, (0, 1, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            topics = [TOPICS[i % 3]] + ([TOPICS[(i + 1) % 3]] if i % 2 else [])
            labels = topics if as_names else [TOPICS.index(t) for t in topics]
            rows.append({"text": _words(rng, topics), "labels": labels})
        write_jsonl(folder / f"{split}.jsonl", rows)
    (folder / "labels.json").write_text(json.dumps(TOPICS), encoding="utf-8")
    return folder


def pair_data(folder: Path, sizes=(90, 45, 45)) -> Path:
    """Pairs of texts: label 0 (`same`) when both are about one topic, else 1; `score` = 5 for
    the same topic, 1 otherwise, plus a little noise."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n, seed in zip(("train", "validation", "test"), sizes, (0, 1, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            a = TOPICS[i % 3]
            b = a if i % 2 == 0 else TOPICS[(i + 1) % 3]
            rows.append({"first": _words(rng, [a]), "second": _words(rng, [b]), "label": int(a != b),
                         "score": (5.0 if a == b else 1.0) + rng.uniform(-0.3, 0.3)})
        write_jsonl(folder / f"{split}.jsonl", rows)
    (folder / "labels.json").write_text(json.dumps(PAIR_LABELS), encoding="utf-8")
    return folder


MULTI_LABEL = ["data.task=multi_label", "data.label_column=labels", "train.best_metric=micro_f1"]
PAIRS = ["data.text_columns=[first]", "data.text_pair_column=second"]
REGRESSION = [*PAIRS, "data.task=regression", "data.label_column=score", "train.best_metric=pearson"]


def overrides(data: Path, run: Path, *extra: str) -> list[str]:
    return [*TINY, f"data.path={data}", f"run_dir={run}", *extra]

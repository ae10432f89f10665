"""Tiny synthetic data for each task type: multi-label topics, sentence pairs (entailment-like
classes and a similarity score). Learnable in a few epochs of a d_model=16 model."""

from __future__ import annotations

import random
from pathlib import Path

from kits import tiny_topics
from kits.tiny_topics import CLASSES, FILLER, SPLITS, WORDS, write_dataset, write_jsonl  # noqa: F401 (write_jsonl: re-exported)

TOPICS = CLASSES
PAIR_LABELS = ["same", "different"]

# The shared tiny run with room for a pair of texts, no dropout and two more epochs, on the CPU.
TINY = [*tiny_topics.TINY, "tokenizer.max_length=24", "model.dropout=0.0", "train.epochs=8", "train.device=cpu"]


def _words(rng: random.Random, topics: list[str]) -> str:
    words = [rng.choice(WORDS[t]) for t in topics for _ in range(rng.randint(1, 3))]
    words += [rng.choice(FILLER) for _ in range(rng.randint(1, 4))]
    rng.shuffle(words)
    return " ".join(words)


def multi_label_data(folder: Path, as_names: bool = False, sizes=(90, 45, 45)) -> Path:
    """Texts mentioning one or two topics; the labels are those topics (ids, or names)."""
    splits = {}
    for split, n, seed in zip(SPLITS, sizes, (0, 1, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            topics = [TOPICS[i % 3]] + ([TOPICS[(i + 1) % 3]] if i % 2 else [])
            labels = topics if as_names else [TOPICS.index(t) for t in topics]
            rows.append({"text": _words(rng, topics), "labels": labels})
        splits[split] = rows
    return write_dataset(folder, splits, TOPICS)


def pair_data(folder: Path, sizes=(90, 45, 45)) -> Path:
    """Pairs of texts: label 0 (`same`) when both are about one topic, else 1; `score` = 5 for
    the same topic, 1 otherwise, plus a little noise."""
    splits = {}
    for split, n, seed in zip(SPLITS, sizes, (0, 1, 2)):
        rng = random.Random(seed)
        rows = []
        for i in range(n):
            a = TOPICS[i % 3]
            b = a if i % 2 == 0 else TOPICS[(i + 1) % 3]
            rows.append({"first": _words(rng, [a]), "second": _words(rng, [b]), "label": int(a != b),
                         "score": (5.0 if a == b else 1.0) + rng.uniform(-0.3, 0.3)})
        splits[split] = rows
    return write_dataset(folder, splits, PAIR_LABELS)


MULTI_LABEL = ["data.task=multi_label", "data.label_column=labels", "train.best_metric=micro_f1"]
PAIRS = ["data.text_columns=[first]", "data.text_pair_column=second"]
REGRESSION = [*PAIRS, "data.task=regression", "data.label_column=score", "train.best_metric=pearson"]


def overrides(data: Path, run: Path, *extra: str) -> list[str]:
    return [*TINY, f"data.path={data}", f"run_dir={run}", *extra]

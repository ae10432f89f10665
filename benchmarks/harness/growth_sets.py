"""Data sets of any size, built from a shared folder, for measuring how a run's cost grows (issue 57):
the shared sets stop at 67k rows, users bring millions.

    short_reviews(source, out, rows=1_000_000)   # 2 labels, reviews of 3 sentences of one polarity
    long_documents(source, out, rows=50_000)     # 90 labels, ~500-word documents

`short_reviews`: each row joins 3 sentences of one label drawn (seeded) from the source's training
split; validation and test join the source's own validation / test sentences the same way, so no
test sentence is a training one. `long_documents`: a synthetic topic set over the source's words,
each label a weighted set of TOPIC_WORDS words, a document mostly background words (the source's
word frequencies) with a share of its label's: learnable, many-label, long, and of any size.
Everything is written under `out` (never into the repository: the source is research-use data).
Rows are written as JSON Lines in blocks, so memory stays that of a block.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

BLOCK = 100_000
"""Rows built and written at a time."""
TOPIC_WORDS = 200
"""Words a label of the long-document set favours."""
TOPIC_SHARE = 0.12
"""Share of a long document's words drawn from its label's topic words (the rest: background)."""


def _write(path: Path, rows: list[str]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(rows))


def _sentences(path: Path) -> tuple[list[str], np.ndarray]:
    texts, labels = [], []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                texts.append(row["text"].strip())
                labels.append(int(row["label"]))
    return texts, np.asarray(labels)


def _join(texts: list[str], labels: np.ndarray, rows: int, rng: np.random.Generator, path: Path) -> None:
    """`rows` rows of 3 sentences of one label each, written to `path` in blocks."""
    path.unlink(missing_ok=True)
    by_label = [np.flatnonzero(labels == k) for k in np.unique(labels)]
    for start in range(0, rows, BLOCK):
        n = min(BLOCK, rows - start)
        label = rng.integers(0, len(by_label), size=n)
        out = []
        for k, pool in enumerate(by_label):
            at = np.flatnonzero(label == k)
            picks = pool[rng.integers(0, len(pool), size=(len(at), 3))]
            out.extend((i, k, " ".join(texts[j] for j in row)) for i, row in zip(at, picks))
        out.sort()
        _write(path, [json.dumps({"text": text, "label": int(k)}) + "\n" for _, k, text in out])


def short_reviews(source: str | Path, out: str | Path, rows: int, evaluation: int = 5_000, seed: int = 0) -> Path:
    """A 2-label (the source's labels) set of `rows` training reviews; `evaluation` rows each of
    validation and test. Returns the folder."""
    source, out = Path(source), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    texts, labels = _sentences(source / "train.jsonl")
    _join(texts, labels, rows, rng, out / "train.jsonl")
    for split in ("validation", "test"):
        texts, labels = _sentences(source / f"{split}.jsonl")
        _join(texts, labels, evaluation, rng, out / f"{split}.jsonl")
    return out


def long_documents(source: str | Path, out: str | Path, rows: int, labels: int = 90, words: int = 500,
                   evaluation: int = 2_000, seed: int = 0) -> Path:
    """A `labels`-label set of `rows` training documents of about `words` words (validation and test:
    `evaluation` each), over the words of the source's training texts. Returns the folder."""
    source, out = Path(source), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    counts = Counter(w for text in _sentences(source / "train.jsonl")[0] for w in text.split())
    vocab = np.array([w for w, _ in counts.most_common()])
    background = np.array([c for _, c in counts.most_common()], dtype=np.float64)
    background /= background.sum()
    per_topic = min(TOPIC_WORDS, len(vocab))  # a small source has fewer words than a topic would take
    topics = [rng.choice(len(vocab), size=per_topic, replace=False) for _ in range(labels)]
    topic_weights = 1.0 / np.arange(1, per_topic + 1)  # Zipf within a topic
    topic_weights /= topic_weights.sum()
    (out / "labels.json").write_text(json.dumps([f"topic_{k:02d}" for k in range(labels)]), encoding="utf-8")
    for split, n in (("train", rows), ("validation", evaluation), ("test", evaluation)):
        path = out / f"{split}.jsonl"
        path.unlink(missing_ok=True)
        for start in range(0, n, BLOCK // 10):
            m = min(BLOCK // 10, n - start)
            label = rng.integers(0, labels, size=m)
            length = np.maximum(50, rng.normal(words, words / 4, size=m).astype(int))
            lines = []
            for k, size in zip(label, length):
                own = rng.random(size) < TOPIC_SHARE
                ids = rng.choice(len(vocab), size=size, p=background)
                ids[own] = topics[k][rng.choice(per_topic, size=int(own.sum()), p=topic_weights)]
                lines.append(json.dumps({"text": " ".join(vocab[ids]), "label": int(k)}) + "\n")
            _write(path, lines)
    return out

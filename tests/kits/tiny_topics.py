"""The tiny synthetic datasets the test suites make, and the tiny classifier run that learns them:
a text's class is given away by its topic words, so a d_model=16 model learns it in a few epochs.

The one shared tiny-data module: every test imports it as `kits.tiny_topics` (tests/conftest.py
puts tests/ on sys.path); the other kits beside it (api_tiny.py, ddp_tiny.py, distill_tiny.py,
tasks_tiny.py, ...) keep only what is specific to their tests.
tests/integration/behaviour/fingerprint.py keeps its own copy on purpose (it runs alone, as a script).
"""

import json
import random
from pathlib import Path

CLASSES = ["animals", "food", "sports"]
WORDS = {
    "animals": ["cat", "dog", "horse", "tiger", "bird", "fish"],
    "food": ["bread", "apple", "cheese", "pasta", "soup", "rice"],
    "sports": ["tennis", "soccer", "golf", "rugby", "boxing", "chess"],
}
FILLER = ["the", "a", "some", "very", "really", "about", "and", "with"]
SPLITS = ("train", "validation", "test")

# Dotted overrides of a classifier run that trains in about a second on one CPU thread.
TINY = [
    "name=tiny", "seed=0",
    "tokenizer.vocab_size=120", "tokenizer.min_frequency=1", "tokenizer.max_length=16",
    "model.d_model=16", "model.nhead=2", "model.num_layers=1", "model.dim_feedforward=32",
    "model.max_len=32", "model.dropout=0.1",
    "train.epochs=6", "train.batch_size=8", "train.eval_batch_size=16", "train.lr=1e-2",
    "train.warmup_steps=5", "train.progress=false", "train.num_threads=1", "train.log_every=5",
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_dataset(folder: Path, splits: dict[str, list[dict]], labels: list[str] | None = None) -> Path:
    """`folder`/<split>.jsonl for each split, and labels.json when `labels` is given."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        write_jsonl(folder / f"{split}.jsonl", rows)
    if labels is not None:
        (folder / "labels.json").write_text(json.dumps(labels), encoding="utf-8")
    return folder


def make_texts(n: int, seed: int) -> list[dict]:
    """Short texts whose class (the label id, cycling through CLASSES) is given away by its topic words."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % len(CLASSES)
        words = [rng.choice(WORDS[CLASSES[label]]) for _ in range(rng.randint(2, 5))]
        words += [rng.choice(FILLER) for _ in range(rng.randint(1, 6))]
        rng.shuffle(words)
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_topic_data(folder: Path, sizes: tuple[int, int, int] = (60, 30, 30), seed: int = 0,
                     labels: bool = True) -> Path:
    """train / validation / test of `make_texts` (seeds seed, seed + 1, seed + 2) and, with
    `labels`, labels.json (CLASSES)."""
    splits = {split: make_texts(n, seed + i) for i, (split, n) in enumerate(zip(SPLITS, sizes))}
    return write_dataset(folder, splits, CLASSES if labels else None)


def tiny_overrides(data_dir, run_dir, *extra: str) -> list[str]:
    return [*TINY, f"data.path={data_dir}", f"run_dir={run_dir}", *extra]


def tiny_config(data_dir, run_dir, *extra: str):
    """The tiny run as a ClassifierConfig (`extra`: more dotted overrides, applied last)."""
    from tfm_cls.config import ClassifierConfig, load_config

    return load_config(ClassifierConfig, None, tiny_overrides(data_dir, run_dir, *extra))

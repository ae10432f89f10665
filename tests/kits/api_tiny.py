"""Tiny data and tiny model settings for the API, TensorBoard, tune and model-card tests."""

from pathlib import Path

from kits import tiny_topics
from kits.tiny_topics import CLASSES, write_jsonl, write_topic_data

# The shared tiny run on the CPU, without the time budget and early stopping of the trec preset
# (the TextClassifier facade starts from it).
ON_CPU = ["train.device=cpu", "train.max_minutes=null", "train.early_stopping_patience=null"]
TINY = [*tiny_topics.TINY, *ON_CPU]


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
    """tiny_topics.make_texts as the estimator takes it: (texts, label names)."""
    rows = tiny_topics.make_texts(n, seed)
    return [r["text"] for r in rows], [CLASSES[r["label"]] for r in rows]


def write_split(path: Path, texts: list[str], labels: list[str]) -> None:
    write_jsonl(path, [{"text": t, "label": CLASSES.index(y)} for t, y in zip(texts, labels)])


def write_tiny_data(folder: Path, n_test: int = 30) -> Path:
    """train (60) / validation (30) / test (n_test) jsonl and labels.json."""
    return write_topic_data(folder, (60, 30, n_test))


def tiny_config(data_dir, run_dir, *extra: str):
    return tiny_topics.tiny_config(data_dir, run_dir, *ON_CPU, *extra)

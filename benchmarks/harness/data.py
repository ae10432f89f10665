"""Reading the data the benchmarks run on: the shared data folders (DATA_ROOT/<name>/ with
train / validation / test .jsonl and labels.json), as rows, texts, or labelled splits
(tfm_cls.classify.baseline.Split: texts, targets, pairs)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tfm_cls.classify.baseline import Split
from tfm_cls.runtime.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
"""The repository root (configs/, bench_results/)."""
DATA_ROOT = REPO.parent / "shared" / "data"
"""The shared data folders beside the repository (../shared/data from its root)."""

__all__ = ["DATA_ROOT", "REPO", "Split", "config_splits", "read_folder", "read_labelled", "read_rows",
           "read_texts", "speed_sample", "splits_of"]


def read_rows(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The first `limit` (all: None) rows of a .jsonl file; blank lines are skipped."""
    rows = []
    for _, row in read_jsonl(path):  # lines end at "\n" only (tfm_cls.runtime.jsonl)
        rows.append(row)
        if limit and len(rows) >= limit:
            break
    return rows


def read_texts(path: str | Path, limit: int | None = None, field: str = "text") -> list[str]:
    """The first `limit` texts of a file: each row's `field` of a .jsonl file, else each
    non-blank line (stripped)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return [row[field] for row in read_rows(path, limit)]
    texts = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                texts.append(line.strip())
                if limit and len(texts) >= limit:
                    break
    return texts


def read_labelled(path: str | Path, limit: int | None = None, cap: int | None = None, seed: int = 0) -> Split:
    """A single-label .jsonl file ({"text", "label"}) as a Split: its first `limit` rows, or a
    seeded sample of `cap` rows (in file order) where it holds more."""
    rows = read_rows(path, limit)
    if cap is not None and len(rows) > cap:
        keep = np.random.default_rng(seed).choice(len(rows), cap, replace=False)
        rows = [rows[i] for i in sorted(keep)]
    return Split([r["text"] for r in rows], np.array([int(r["label"]) for r in rows]))


def read_folder(folder: str | Path, splits: Iterable[str] = ("train", "validation", "test")) -> dict[str, Split]:
    """The splits of a data folder: single-label rows ({"text", "label"}) as class ids [N],
    multi-label rows ({"text", "labels": [ids]}) as multi-hot targets [N, len(labels.json)]."""
    folder = Path(folder)
    out = {}
    for split in splits:
        rows = read_rows(folder / f"{split}.jsonl")
        if rows and "labels" in rows[0]:
            num_labels = len(json.loads((folder / "labels.json").read_text(encoding="utf-8")))
            targets = np.zeros((len(rows), num_labels), dtype=np.int64)
            for i, r in enumerate(rows):
                targets[i, r["labels"]] = 1
        else:
            targets = np.array([int(r["label"]) for r in rows])
        out[split] = Split([r["text"] for r in rows], targets)
    return out


def splits_of(datasets_by_name: dict[str, Any]) -> dict[str, Split]:
    """Split views of a ClassificationData's splits (`text`, `label`, and `text_pair` for pairs)."""
    return {
        name: Split(list(ds["text"]), np.asarray(ds["label"]),
                    list(ds["text_pair"]) if "text_pair" in ds.column_names else None)
        for name, ds in datasets_by_name.items()
    }


def config_splits(dataset: str, folder: str | Path, overrides: Iterable[str] = ()) -> tuple[dict[str, Split], str]:
    """The splits every system of a benchmark sees: the data section of configs/cls/<dataset>.yaml
    on the local `folder` (validation carved from train where the folder has none, as training
    does), and the task type."""
    from tfm_cls.config import ClassifierConfig, load_config
    from tfm_cls.data.sources import load_data

    cfg = load_config(ClassifierConfig, REPO / "configs" / "cls" / f"{dataset}.yaml", [f"data.path={folder}", *overrides])
    return splits_of(load_data(cfg.data).splits), cfg.data.task


def speed_sample(split: Split, size: int) -> list[str]:
    """The first `size` texts of a split (0: all): what timed passes run on."""
    return split.texts[:size] if size else split.texts

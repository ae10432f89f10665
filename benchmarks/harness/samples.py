"""Few-label samples of a data folder, and any folder read as labelled splits.

    few_label_rows   K training rows of each label, drawn by a seeded shuffle (multi-label: a row is
                     taken while one of its labels has fewer than K, never past 2K of any label)
    write_sample     a sample folder (train.jsonl: the K-shot rows; test.jsonl: the source's whole
                     test split; labels.json; sample.json: what was drawn), written once, reused
    read_splits      a folder's train / validation / test as Splits, with its task and columns

A sample has no validation file on purpose: with 8 examples a class a system must do without one
(the few-label regime of issue 36). The rows are copied as they are (every column), so a system
reads a sample exactly as it reads the source folder.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness.data import read_rows
from tfm_cls.classify.baseline import Split
from tfm_cls.io import write_text

PAIR_COLUMNS = (("text", "text_pair"), ("sentence_a", "sentence_b"), ("sentence1", "sentence2"),
                ("premise", "hypothesis"), ("question", "answer"), ("query", "document"))
"""Two text columns read as a sentence pair (the pairs tfm_cls.train.plan.profile recognises first)."""
LABEL_COLUMNS = ("label", "labels")
SPLITS = ("train", "validation", "test")

__all__ = ["Columns", "columns_of", "few_label_rows", "read_splits", "sample_name", "write_sample"]


@dataclasses.dataclass(frozen=True)
class Columns:
    """Which columns of a folder's rows hold what, and the task they make."""

    text: str
    pair: str | None
    label: str
    task: str
    """single_label (class ids or names), multi_label (lists of them) or regression (real numbers)."""


def columns_of(rows: list[dict[str, Any]]) -> Columns:
    """The text, pair and label columns of training rows, and the task their labels say."""
    if not rows:
        raise ValueError("no rows to read the columns from")
    first = rows[0]
    label = next((c for c in LABEL_COLUMNS if c in first), None)
    if label is None:
        raise ValueError(f"no label column ({' or '.join(LABEL_COLUMNS)}) among {sorted(first)}")
    text, pair = next(((a, b) for a, b in PAIR_COLUMNS if a in first and b in first), ("text", None))
    if text not in first:
        raise ValueError(f"no text column among {sorted(first)}")
    values = [r[label] for r in rows]
    if any(isinstance(v, list) for v in values):
        task = "multi_label"
    elif any(isinstance(v, float) and not v.is_integer() for v in values):
        task = "regression"
    else:
        task = "single_label"
    return Columns(text, pair, label, task)


def _label_list(row: dict[str, Any], columns: Columns) -> list[Any]:
    value = row[columns.label]
    return list(value) if isinstance(value, list) else [value]


def few_label_rows(rows: list[dict[str, Any]], shots: int, seed: int, columns: Columns | None = None) -> list[dict[str, Any]]:
    """`shots` rows of each label, in the order a `random.Random(seed)` shuffle of the rows visits
    them, then shuffled by the same generator. Single-label: a row is taken while its class has fewer than `shots`. Multi-label: while
    one of its labels has fewer than `shots` and none would pass 2 x `shots` (rows without a label
    are skipped). A label with fewer rows than `shots` gives all it has."""
    columns = columns or columns_of(rows)
    if columns.task == "regression":
        raise ValueError("few-label samples need labels: this data is regression")
    order = list(range(len(rows)))
    rng = random.Random(seed)
    rng.shuffle(order)
    counts: Counter = Counter()
    cap = 2 * shots
    taken = []
    for i in order:
        labels = _label_list(rows[i], columns)
        if not labels or not any(counts[label] < shots for label in labels):
            continue
        if any(counts[label] >= cap for label in labels):
            continue
        taken.append(rows[i])
        counts.update(labels)
    rng.shuffle(taken)  # the training order: not grouped by where the labels filled up
    return taken


def sample_name(shots: int | None, seed: int | None) -> str:
    """`full` (the folder as it is), else `k<shots>-s<seed>`."""
    return "full" if shots is None else f"k{shots}-s{seed}"


def write_sample(source: str | Path, out: str | Path, shots: int, seed: int) -> Path:
    """The K-shot sample of `source` in `out` (train.jsonl, test.jsonl, labels.json, sample.json),
    drawn and written once: an existing sample of the same source, K and seed is reused. Written
    into a temporary folder renamed at the end, so an interrupted write leaves no half sample."""
    source, out = Path(source), Path(out)
    spec = {"source": str(source.resolve()), "shots": shots, "seed": seed}
    done = out / "sample.json"
    if done.is_file():
        recorded = json.loads(done.read_text(encoding="utf-8"))
        if {k: recorded.get(k) for k in spec} == spec:
            return out
        raise ValueError(f"{out} holds another sample ({recorded}); remove it or choose another folder")
    if not (source / "test.jsonl").is_file():
        raise ValueError(f"{source}: no test.jsonl (a sample is scored on the source's test split)")
    rows = read_rows(source / "train.jsonl")
    columns = columns_of(rows)
    taken = few_label_rows(rows, shots, seed, columns)
    counts = Counter(label for row in taken for label in _label_list(row, columns))
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    write_text(partial / "train.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in taken))
    shutil.copyfile(source / "test.jsonl", partial / "test.jsonl")
    if (source / "labels.json").is_file():
        shutil.copyfile(source / "labels.json", partial / "labels.json")
    write_text(partial / "sample.json", json.dumps(
        {**spec, "train_rows": len(taken), "source_train_rows": len(rows), "task": columns.task,
         "per_label": {str(k): v for k, v in sorted(counts.items(), key=lambda kv: str(kv[0]))}}, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return out


def _label_index(folder: Path, values: list[Any]) -> dict[Any, int]:
    """Class id or name -> index: labels.json's order where the folder has one, else the ids as
    they are, else the names sorted."""
    names_file = folder / "labels.json"
    if names_file.is_file():
        names = json.loads(names_file.read_text(encoding="utf-8"))
        return {**{i: i for i in range(len(names))}, **{str(n): i for i, n in enumerate(names)}}
    if all(isinstance(v, int) for v in values):
        return {i: i for i in range(max(values) + 1)}
    return {n: i for i, n in enumerate(sorted({str(v) for v in values}))}


def read_splits(folder: str | Path) -> tuple[dict[str, Split], Columns, int]:
    """The folder's splits (those present of train, validation, test) as Splits, their columns and
    task, and the number of labels (0 for regression). Targets: class ids [N], multi-hot [N, C] or
    values [N]; pairs: the second text of each row."""
    folder = Path(folder)
    raw = {s: read_rows(folder / f"{s}.jsonl") for s in SPLITS if (folder / f"{s}.jsonl").is_file()}
    columns = columns_of(raw["train"])
    values = [label for rows in raw.values() for row in rows for label in _label_list(row, columns)]
    index = {} if columns.task == "regression" else _label_index(folder, values)
    num_labels = max(index.values(), default=-1) + 1
    splits = {}
    for name, rows in raw.items():
        if columns.task == "regression":
            targets = np.array([float(r[columns.label]) for r in rows])
        elif columns.task == "multi_label":
            targets = np.zeros((len(rows), num_labels), dtype=np.int64)
            for i, r in enumerate(rows):
                targets[i, [index[v] for v in r[columns.label]]] = 1
        else:
            targets = np.array([index[r[columns.label]] for r in rows], dtype=np.int64)
        pairs = None if columns.pair is None else [str(r[columns.pair] or "") for r in rows]
        splits[name] = Split([str(r[columns.text] or "") for r in rows], targets, pairs)
    return splits, columns, num_labels


HOLDOUT = 0.1
MIN_HOLDOUT = 500


def single_label_splits(folder: str | Path) -> tuple[tuple[list[str], np.ndarray], ...] | None:
    """(train, validation, test) texts and class ids of a single-label folder of single texts; None
    for any other. Without a validation split, a seeded (0) tenth of train, at least MIN_HOLDOUT
    texts, is held out as one."""
    splits, columns, _ = read_splits(folder)
    if columns.task != "single_label" or columns.pair is not None:
        return None
    train, test = splits["train"], splits["test"]
    if "validation" in splits:
        validation = splits["validation"]
        return (train.texts, train.targets), (validation.texts, validation.targets), (test.texts, test.targets)
    order = np.random.default_rng(0).permutation(len(train.texts))
    held = max(MIN_HOLDOUT, int(HOLDOUT * len(order)))
    pick = lambda rows: ([train.texts[i] for i in rows], train.targets[rows])  # noqa: E731
    return pick(order[held:]), pick(order[:held]), (test.texts, test.targets)

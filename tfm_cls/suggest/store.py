"""The labelled data folder (DIR: train.jsonl, optional validation / test, labels.json): its texts
and labels read for suggest, and new labels appended to DIR/train.jsonl by the label page.

Lines end at "\\n" only (runtime.jsonl: a text holding U+2028 or U+0085 stays one row). An append
rewrites train.jsonl through runtime.jsonl.append_jsonl (a crash leaves the old file or the new
one, never a torn line) under an exclusive lock on DIR/.train.jsonl.lock (a second tab or a second
`tfm-cls label` waits its turn instead of overwriting the first's rows); a text already in the
file is not added twice. Labels are written as the file writes them: indices where its rows hold
indices, else names."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tfm_cls.errors import DataError
from tfm_cls.runtime.jsonl import append_jsonl, read_jsonl
from tfm_cls.suggest.names import LabelNames, read_labels
from tfm_cls.suggest.pool import text_key

SPLITS = ("train", "validation", "test")
TRAIN = "train.jsonl"
LABELS = "labels.json"
LOCK = ".train.jsonl.lock"


@dataclasses.dataclass
class Labelled:
    """The folder's texts: train's with their targets (class ids [M], or multi-hot [M, C]), and the
    keys of every split's texts (never suggested again)."""

    names: LabelNames
    texts: list[str]
    targets: np.ndarray
    keys: set[bytes]
    multi_label: bool = False

    def counts(self) -> list[int]:
        t = self.targets
        if self.multi_label:
            return [int(c) for c in t.sum(axis=0)] if len(t) else [0] * len(self.names.names)
        return [int(c) for c in np.bincount(t.astype(int), minlength=len(self.names.names))] if len(t) else [0] * len(self.names.names)


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of a JSON Lines file of the folder: lines end at "\\n" only (runtime.jsonl), a line
    that is not one JSON object or holds invalid UTF-8 is a DataError naming it (as training says)."""
    return read_jsonl(path, error=DataError, objects=True)


def _index(value: Any, names: list[str], where: str) -> int:
    if isinstance(value, str) and value in names:
        return names.index(value)
    if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).lstrip("-").isdigit() \
            and 0 <= int(value) < len(names):
        return int(value)
    raise DataError(f"{where}: label {value!r} is not one of {names[:10]} (nor an index into them)")


def read_folder(folder: str | Path, text_field: str = "text") -> Labelled:
    """DIR's labelled texts (jsonl files named train / validation / test; labels.json for names).
    A folder without train.jsonl is an empty labelled set (a cold start with names)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"--data {folder}: no such folder; make one holding labels.json (the label names) "
                        "and, once there are labels, train.jsonl")
    rows = {s: list(_rows(folder / f"{s}.jsonl")) for s in SPLITS if (folder / f"{s}.jsonl").is_file()}
    train = rows.get("train", [])
    multi = any("labels" in r and "label" not in r for _, r in train)
    column = "labels" if multi else "label"
    if (folder / LABELS).is_file():
        names = read_labels(folder / LABELS)
    else:
        seen = sorted({str(v) for _, r in train for v in (r.get(column) if multi else [r.get(column)]) if v is not None})
        if not seen:
            raise DataError(f"{folder}: no {LABELS} and no labelled rows; write the label names into {folder / LABELS} "
                            '(e.g. ["neg", "pos"], or {"neg": "a negative review", "pos": "a positive review"})')
        names = LabelNames(seen, [None] * len(seen))
    texts, targets = [], []
    for lineno, row in train:
        where = f"{folder / TRAIN}, line {lineno}"
        text = row.get(text_field)
        if not isinstance(text, str):
            raise DataError(f"{where}: no text field {text_field!r}")
        if multi:
            target = np.zeros(len(names.names), np.float32)
            for v in row.get(column) or []:
                target[_index(v, names.names, where)] = 1.0
        else:
            target = _index(row.get(column), names.names, where)
        texts.append(text)
        targets.append(target)
    keys = {text_key(r[text_field]) for split in rows.values() for _, r in split if isinstance(r.get(text_field), str)}
    shape = (0, len(names.names)) if multi else (0,)
    return Labelled(names, texts, np.asarray(targets) if targets else np.zeros(shape), keys, multi)


def folder_files(folder: str | Path) -> frozenset[str]:
    """The names of the files of DIR that training reads or the label page writes (those there and
    those that could be): an output must not be one of them."""
    folder = Path(folder)
    there = {p.name for p in folder.iterdir() if p.is_file() and p.stem in SPLITS} if folder.is_dir() else set()
    return frozenset({*there, TRAIN, LABELS, LOCK, *(f"{s}.{ext}" for s in SPLITS for ext in ("jsonl", "json", "csv",
                                                                                                "parquet"))})


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on the folder's train.jsonl (fcntl: released when the process dies)."""
    with open(folder / LOCK, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def append_labels(folder: str | Path, rows: list[dict[str, Any]], names: list[str], text_field: str = "text") -> int:
    """Append {text, label (a name) or labels (names)} rows to DIR/train.jsonl, atomically and
    under the lock; texts already there are skipped. Returns how many rows were added."""
    folder = Path(folder)
    path = folder / TRAIN
    with locked(folder):
        existing = [r for _, r in read_jsonl(path, error=DataError, objects=True)] if path.is_file() else []
        as_index = bool(existing) and all(isinstance(r.get("label", r.get("labels")), int) or
                                          isinstance(r.get("labels"), list) and all(isinstance(v, int) for v in r["labels"])
                                          for r in existing[:50])
        have = {text_key(r.get(text_field, "")) for r in existing if isinstance(r.get(text_field), str)}
        new = []
        for row in rows:
            key = text_key(row["text"])
            if key in have:
                continue
            have.add(key)
            if "labels" in row:
                value: Any = [names.index(v) if as_index else v for v in row["labels"]]
                new.append({text_field: row["text"], "labels": value})
            else:
                new.append({text_field: row["text"], "label": names.index(row["label"]) if as_index else row["label"]})
        return append_jsonl(path, new)

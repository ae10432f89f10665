"""What a data folder holds, read before anything is trained: `profile_data(folder)`.

    DataProfile  the task type and why, the columns, the labels and how often each occurs, the
                 splits given, the texts' lengths in the pretrained encoder's tokens and the share
                 of those tokens it reads as [UNK]

The columns and the task type come from the training file itself: the label column is the one
named like a label (`label`, `labels`, `target`, ...), else the only column that holds no text;
its values say the task (an int or a string: single-label; a list: multi-label; a float:
regression, unless every value is a whole number); two text columns are sentence pairs. Data that
cannot be trained on (one label only, every text empty, labels that are mappings, a class with one
example) is a DataError naming the file, before anything is written.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

from tfm_cls.errors import DataError

logger = logging.getLogger(__name__)

LABEL_NAMES = ("label", "labels", "target", "targets", "class", "category", "categories", "y", "score",
               "relatedness", "topic", "tags")
"""Column names taken as the label column, in this order of preference."""
ID_NAMES = ("id", "idx", "uid", "guid", "index")
"""Columns that identify a row: never text, never a label."""
PAIR_NAMES = (("text", "text_pair"), ("sentence_a", "sentence_b"), ("sentence1", "sentence2"),
              ("premise", "hypothesis"), ("question", "answer"), ("query", "document"))
PROFILE_ROWS = 5000
"""Texts the lengths and the [UNK] share are measured on (a seeded sample of train)."""


@dataclasses.dataclass
class DataProfile:
    """What `profile_data` found; `describe()` says it in a few lines."""

    folder: str
    files: dict[str, str]
    """split -> the file it is read from (train, and validation / test where given)."""
    text_column: str
    text_pair_column: str | None
    label_column: str
    task: str
    """single_label, multi_label or regression."""
    task_reason: str
    labels: list[str]
    """Label names in index order (empty for regression)."""
    counts: list[int]
    """Training examples of each label (multi-label: texts holding it)."""
    sizes: dict[str, int]
    """split -> rows, for the splits given."""
    empty_texts: int
    lengths: dict[str, int]
    """p50 / p95 / p99 / max of the training texts' lengths in the encoder's tokens ([CLS] and
    [SEP] included; both texts of a pair); {} without a pretrained tokenizer."""
    unk_share: float | None
    """Share of the encoder's tokens that are [UNK] over the sample (None: no pretrained tokenizer)."""
    unlabelled: int = 0
    """Multi-label: training rows with an empty list of labels."""

    @property
    def pairs(self) -> bool:
        return self.text_pair_column is not None

    @property
    def per_label(self) -> dict[str, float]:
        """min / median / max training examples per label."""
        if not self.counts:
            return {}
        ordered = sorted(self.counts)
        return {"min": ordered[0], "median": ordered[len(ordered) // 2], "max": ordered[-1]}

    def describe(self) -> list[str]:
        lines = [f"data {self.folder}: {', '.join(f'{k} {v:,}' for k, v in self.sizes.items())} rows "
                 f"(files: {', '.join(Path(f).name for f in self.files.values())})",
                 f"task {self.task}: {self.task_reason}",
                 f"columns: text {self.text_column!r}" + (f", second text {self.text_pair_column!r}" if self.pairs else "")
                 + f", label {self.label_column!r}"]
        if self.labels:
            p = self.per_label
            lines.append(f"labels: {len(self.labels)}, training examples per label min {p['min']}, median "
                         f"{p['median']}, max {p['max']}")
        if self.lengths:
            lines.append("lengths in the encoder's tokens: " + ", ".join(f"{k} {v}" for k, v in self.lengths.items())
                         + f"; [UNK] share {self.unk_share:.2%}")
        if self.empty_texts:
            lines.append(f"empty texts in train: {self.empty_texts}")
        return lines


def _raw_splits(folder: Path) -> tuple[Any, dict[str, Path]]:
    """The folder's split files as one DatasetDict of their raw columns (the reader of training)."""
    from tfm_cls.data.sources import read_split_files

    return read_split_files(folder)


def _kind(value: Any) -> str:
    """text, int, float, bool, list, dict or none: what one cell holds."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


def _column_kinds(rows: list[dict[str, Any]]) -> dict[str, str]:
    """column -> the kind of its non-null cells (`mixed` when they differ; int and float -> float)."""
    kinds: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row.items():
            kinds.setdefault(key, set()).add(_kind(value))
    out = {}
    for key, seen in kinds.items():
        seen = seen - {"none"}
        if seen == {"int", "float"}:
            seen = {"float"}
        out[key] = seen.pop() if len(seen) == 1 else ("none" if not seen else "mixed")
    return out


def _label_column(kinds: dict[str, str], rows: list[dict[str, Any]], file: Path) -> str:
    for name in LABEL_NAMES:
        if name in kinds:
            return name
    candidates = [c for c, k in kinds.items() if k != "text" and c.lower() not in ID_NAMES]
    if len(candidates) == 1:
        return candidates[0]
    texts = [c for c, k in kinds.items() if k == "text" and c.lower() not in ID_NAMES]
    if not candidates and len(texts) == 2:  # two text columns: the label is the one with few distinct values
        distinct = {c: len({r.get(c) for r in rows}) for c in texts}
        short = min(texts, key=lambda c: distinct[c])
        if distinct[short] <= max(2, len(rows) // 10):
            return short
    raise DataError(f"{file}: cannot tell the label column among {sorted(kinds)}; name it `label` (or pass "
                    "data.label_column=NAME with --config, see docs/training.md)")


def _text_columns(kinds: dict[str, str], label: str, file: Path) -> tuple[str, str | None]:
    texts = [c for c, k in kinds.items() if k == "text" and c != label and c.lower() not in ID_NAMES]
    if not texts:
        raise DataError(f"{file}: no text column (columns: {', '.join(f'{c} ({k})' for c, k in kinds.items())})")
    if len(texts) == 1:
        return texts[0], None
    for first, second in PAIR_NAMES:
        if first in texts and second in texts:
            return first, second
    if len(texts) == 2:
        return texts[0], texts[1]
    raise DataError(f"{file}: several text columns {texts}; sentence pairs need exactly two (e.g. text, text_pair), "
                    "or join them with --config and data.text_columns=[...]")


def _task(kind: str, values: list[Any], column: str, file: Path) -> tuple[str, str]:
    if kind == "dict":
        raise DataError(f"{file}: the label column {column!r} holds mappings (e.g. {values[0]!r}); expected a class "
                        "id or name, a list of them (multi-label) or a number (regression)")
    if kind == "list":
        return "multi_label", f"column {column!r} holds lists of labels"
    if kind in ("int", "bool"):
        return "single_label", f"column {column!r} holds class ids"
    if kind == "text":
        return "single_label", f"column {column!r} holds class names"
    if kind == "float":
        if all(float(v).is_integer() for v in values if v is not None):
            return "single_label", f"column {column!r} holds whole numbers only, read as class ids"
        return "regression", f"column {column!r} holds real numbers"
    raise DataError(f"{file}: the label column {column!r} holds {kind} values (e.g. {values[:3]!r}); expected a class "
                    "id or name, a list of them (multi-label) or a number (regression)")


def _labels_and_counts(task: str, values: list[Any], names_file: Path, file: Path) -> tuple[list[str], list[int]]:
    """Label names in index order and the training examples of each (multi-label: rows holding it)."""
    if task == "regression":
        finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        if len(set(finite)) < 2:
            raise DataError(f"{file}: every regression target is the same ({finite[:1]}); nothing to learn")
        return [], []
    from tfm_cls.data.targets import read_label_names  # the training side's reader: the same checks

    given = read_label_names(names_file) if names_file.is_file() else None
    seen: Counter = Counter()
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        seen.update(items if task == "multi_label" else items[:1])
    seen.pop(None, None)
    if given is not None:
        names = [str(n) for n in given]
        index = {**{i: i for i in range(len(names))}, **{n: i for i, n in enumerate(names)}}
    elif all(isinstance(k, int) for k in seen):
        names = [str(i) for i in range(max(seen) + 1)] if seen else []
        index = {i: i for i in range(len(names))}
    else:
        names = sorted(str(k) for k in seen)
        index = {n: i for i, n in enumerate(names)}
    counts = [0] * len(names)
    for key, n in seen.items():
        i = index.get(key if not isinstance(key, float) else int(key))
        if i is None:
            raise DataError(f"{file}: label {key!r} is not one of the names in {names_file.name} ({names[:10]}...)")
        counts[i] += n
    present = [n for n, c in zip(names, counts) if c > 0]
    if len(present) < 2:
        raise DataError(f"{file}: every training example has the label {present[0] if present else None!r}; a "
                        "classifier needs at least two labels")
    if task == "single_label":
        alone = [n for n, c in zip(names, counts) if c == 1]
        if alone:
            raise DataError(f"{file}: {len(alone)} class(es) with a single training example ({', '.join(alone[:10])}); "
                            "give at least 2 examples of every class, or remove the class")
    return names, counts


def _token_lengths(texts: list[str], pairs: list[str] | None) -> tuple[dict[str, int], float | None]:
    """Length percentiles in the packaged MiniLM's tokens and its [UNK] share; ({}, None) when the
    checkpoint is not installed."""
    from tfm_cls.plan.pretrained_encoder import pretrained_tokenizer

    tokenizer = pretrained_tokenizer()
    if tokenizer is None:
        return {}, None
    encodings = tokenizer.encode_batch(list(zip(texts, pairs)) if pairs is not None else texts)
    lengths = sorted(len(e.ids) for e in encodings)
    unk = tokenizer.token_to_id("[UNK]")
    tokens = sum(len(e.ids) - 2 for e in encodings)
    unknown = sum(e.ids.count(unk) for e in encodings)

    def at(q: float) -> int:
        return lengths[min(len(lengths) - 1, int(q * len(lengths)))]

    return {"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "max": lengths[-1]}, unknown / max(tokens, 1)


def profile_data(folder: str | Path, seed: int = 0) -> DataProfile:
    """Read the folder's training file (and the sizes of the others) and say what it holds."""
    folder = Path(folder).expanduser()
    dsd, files = _raw_splits(folder)
    train_file = files["train"]
    train = dsd["train"]
    rows = [train[i] for i in range(min(len(train), PROFILE_ROWS))]
    kinds = _column_kinds(rows)
    label = _label_column(kinds, rows, train_file)
    text, pair = _text_columns(kinds, label, train_file)
    values = train[label]
    task, reason = _task(kinds[label], values, label, train_file)
    names, counts = _labels_and_counts(task, values, folder / "labels.json", train_file)
    texts = ["" if t is None else str(t) for t in train[text]]
    empty = sum(not t.strip() for t in texts)
    if empty == len(texts):
        raise DataError(f"{train_file}: every text in column {text!r} is empty")
    sample = random.Random(seed).sample(range(len(texts)), min(len(texts), PROFILE_ROWS))
    second = None if pair is None else ["" if t is None else str(t) for t in train[pair]]
    lengths, unk_share = _token_lengths([texts[i] for i in sample], None if second is None else [second[i] for i in sample])
    return DataProfile(
        folder=str(folder), files={k: str(v) for k, v in files.items()}, text_column=text, text_pair_column=pair,
        label_column=label, task=task, task_reason=reason, labels=names, counts=counts,
        sizes={k: len(v) for k, v in dsd.items()}, empty_texts=empty, lengths=lengths, unk_share=unk_share,
        unlabelled=sum(isinstance(v, (list, tuple)) and not v for v in values) if task == "multi_label" else 0,
    )

"""What a data folder (or a Hugging Face hub dataset) holds, read before anything is trained:
`profile_data(folder)`, `profile_data(DataConfig(name="ag_news", path=None))`.

    DataProfile  the task type and why, the columns, the labels and how often each occurs, the
                 splits given, the texts' lengths in the pretrained encoder's tokens and the share
                 of those tokens it reads as [UNK]

The columns and the task type come from the training file itself: the label column is the one
named like a label (`label`, `labels`, `target`, ...), else the only column that holds no text;
its values say the task (an int or a string: single-label; a list: multi-label; a float:
regression, unless every value is a whole number); two text columns are sentence pairs. Every split
is then read as training will read it, through training's own checks (tfm_cls.data.sources
`columns_and_labels`: a missing label, a label outside labels.json or never seen in training, a
target that is not a finite number, a pair without its second text, ... each a DataError naming the
file and line), so what the profile passes, training accepts; the label names and counts are those
training gets. Data the recipe cannot train on beyond that (every text empty, labels that are
mappings, a class with one example, one regression value) is refused here too, before anything is
written.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

from tfm_cls.config import DataConfig
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
    chars_per_token: float | None = None
    """The sample's characters (spaces aside) per token the run reads them as: the encoder's tokens,
    each character of an [UNK] span counted as one (what an extended vocabulary makes of them).
    Near 1 where the tokens are characters (CJK, whose ideographs BERT's tokenizer splits apart),
    about 4 for English word pieces. None: no pretrained tokenizer."""
    unlabelled: int = 0
    """Multi-label: training rows with an empty list of labels."""
    source: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The data.* keys that say where the data are: {path} for a local folder; {name, config_name,
    train_split, validation_split, test_split} for a hub dataset (`folder` is then its id)."""

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
                         + f"; [UNK] share {self.unk_share:.2%}"
                         + (f"; {self.chars_per_token:.1f} characters a token" if self.chars_per_token else ""))
        if self.empty_texts:
            lines.append(f"empty texts in train: {self.empty_texts}")
        return lines


HUB_KEYS = ("name", "config_name", "train_split", "validation_split", "test_split")
"""The DataConfig keys that name a hub dataset and its splits."""


def _source_keys(source: DataConfig) -> dict[str, Any]:
    if source.path:
        return {"path": source.path}
    return {key: getattr(source, key) for key in HUB_KEYS}


def _raw_splits(source: DataConfig) -> tuple[Any, dict[str, str], Path | None, str]:
    """The splits as one DatasetDict of their raw columns (training's reader), split -> what each
    was read from, the labels.json beside local data (or None), and the source as training names
    it in its messages."""
    from tfm_cls.data.sources import read_source, read_split_files

    if source.path:
        folder = Path(source.path)
        dsd, files = read_split_files(folder)
        labels_file = folder / "labels.json"
        return dsd, {k: str(v) for k, v in files.items()}, labels_file if labels_file.is_file() else None, str(folder)
    dsd, labels_file, where = read_source(source)
    hub_split = {"train": source.train_split, "validation": source.validation_split, "test": source.test_split}
    return dsd, {split: f"{source.name}[{hub_split[split]}]" for split in dsd}, labels_file, where


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


def _counts(task: str, targets: list[Any], names: list[str], file: str) -> list[int]:
    """Training examples of each label (multi-label: rows holding it) from the targets as training
    encoded them; what training accepts but the recipe cannot learn from is refused."""
    if task == "regression":
        if len(set(targets)) < 2:
            raise DataError(f"{file}: every regression target is the same ({targets[:1]}); nothing to learn")
        return []
    if task == "multi_label":
        counts = [sum(column) for column in zip(*targets)] if targets else [0] * len(names)
    else:
        seen = Counter(targets)
        counts = [seen.get(i, 0) for i in range(len(names))]
    present = [n for n, c in zip(names, counts) if c > 0]
    if len(present) < 2:
        raise DataError(f"{file}: every training example has the label {present[0] if present else None!r}; a "
                        "classifier needs at least two labels")
    if task == "single_label":
        alone = [n for n, c in zip(names, counts) if c == 1]
        if alone:
            raise DataError(f"{file}: {len(alone)} class(es) with a single training example ({', '.join(alone[:10])}); "
                            "give at least 2 examples of every class, or remove the class")
    return counts


def _token_lengths(texts: list[str], pairs: list[str] | None) -> tuple[dict[str, int], float | None, float | None]:
    """Length percentiles in the packaged MiniLM's tokens, its [UNK] share and the characters a token
    (DataProfile.chars_per_token); ({}, None, None) when the checkpoint is not installed."""
    from tfm_cls.pretrained_encoder import pretrained_tokenizer

    tokenizer = pretrained_tokenizer()
    if tokenizer is None:
        return {}, None, None
    encodings = tokenizer.encode_batch(list(zip(texts, pairs)) if pairs is not None else texts)
    lengths = sorted(len(e.ids) for e in encodings)
    unk = tokenizer.token_to_id("[UNK]")
    tokens = sum(len(e.ids) - 2 for e in encodings)
    unknown = sum(e.ids.count(unk) for e in encodings)
    characters = sum(not c.isspace() for t in [*texts, *(pairs or [])] for c in t)
    unknown_characters = sum(end - start for e in encodings for i, (start, end) in zip(e.ids, e.offsets) if i == unk)
    read_as = tokens - unknown + unknown_characters

    def at(q: float) -> int:
        return lengths[min(len(lengths) - 1, int(q * len(lengths)))]

    return ({"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "max": lengths[-1]}, unknown / max(tokens, 1),
            characters / read_as if read_as else None)


def profile_data(data: str | Path | DataConfig, seed: int = 0) -> DataProfile:
    """Read the training split (and every split through training's checks) and say what it holds.
    `data`: a local folder, or a DataConfig naming one (`path`) or a hub dataset (`name`, with
    `config_name` and the split names)."""
    import pyarrow.compute as pc

    from tfm_cls.data.sources import columns_and_labels

    source = data if isinstance(data, DataConfig) else DataConfig(path=str(Path(data).expanduser()))
    dsd, files, labels_file, where = _raw_splits(source)
    train_file = files["train"]
    train = dsd["train"]
    rows = train.select(range(min(len(train), PROFILE_ROWS))).to_list()  # one read, not one table a row
    kinds = _column_kinds(rows)
    label = _label_column(kinds, rows, train_file)
    text, pair = _text_columns(kinds, label, train_file)
    values = train[label]
    task, reason = _task(kinds[label], values, label, train_file)
    unlabelled = sum(isinstance(v, (list, tuple)) and not v for v in values) if task == "multi_label" else 0
    as_trained = DataConfig(**_source_keys(source), task=task, text_columns=[text], label_column=label,
                            text_pair_column=pair, allow_empty_labels=unlabelled > 0)  # what the plan will set
    encoded, names = columns_and_labels(dsd, as_trained, where, labels_file)  # training's checks, every split
    counts = _counts(task, encoded["train"]["label"], names if task != "regression" else [], train_file)
    texts = encoded["train"].with_format("arrow")["text"]  # the whole column, read by Arrow's kernels
    empty = int(pc.sum(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(texts)), 0)).as_py() or 0)
    if empty == len(texts):
        raise DataError(f"{train_file}: every text in column {text!r} is empty")
    sample = sorted(random.Random(seed).sample(range(len(texts)), min(len(texts), PROFILE_ROWS)))
    sampled = encoded["train"].select(sample).to_dict()  # one read of the sampled rows
    lengths, unk_share, chars_per_token = _token_lengths(sampled["text"], sampled["text_pair"] if pair else None)
    return DataProfile(
        folder=str(source.path or source.name), files=files, text_column=text, text_pair_column=pair,
        label_column=label, task=task, task_reason=reason, labels=names if task != "regression" else [],
        counts=counts, sizes={k: len(v) for k, v in dsd.items()}, empty_texts=empty, lengths=lengths,
        unk_share=unk_share, chars_per_token=chars_per_token, unlabelled=unlabelled, source=_source_keys(source),
    )

"""How each task type (`data.task`) reads its label column: names, checks, encoding.

    single_label   one class per example: names or ids -> 0..C-1, a ClassLabel
    multi_label    a list of names / ids (or a delimited string) per example -> multi-hot [C] int8
    regression     a finite number per example -> float32

`targets_of(task)` gives the reader of a task: `encode` maps every split of a dataset (the class
names from a ClassLabel feature, labels.json, given names or the training split), `encode_eval`
maps one labelled file onto a trained run's classes (`tfm-cls eval --data`). Each error names the
file and row and what was expected.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Sequence, Value

from tfm_cls.config import DataConfig
from tfm_cls.errors import DataError
from tfm_cls.runtime.heads import MULTI_LABEL, REGRESSION, SINGLE_LABEL
from tfm_cls.runtime.readers import Stats, decoded_lines

logger = logging.getLogger(__name__)


def read_label_names(path: Path) -> list[str]:
    """The class names of a labels.json: a list in index order, {name: index}, or {name: description}."""
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read class names ({err})") from err
    if isinstance(names, dict) and names and all(isinstance(v, str) for v in names.values()):
        names = list(names)  # {name: description} (tfm_cls.suggest.names), in file order
    elif isinstance(names, dict):  # {name: index}
        names = [name for name, _ in sorted(names.items(), key=lambda kv: kv[1])]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise DataError(f"{path}: expected a JSON list of class names in index order, got {str(names)[:100]}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise DataError(f"{path}: the class name(s) {', '.join(repeated)} appear more than once; each class needs "
                        "a name of its own")
    return names


def row_place(where: str, row: int) -> str:
    """Where the `row`-th example (1-based) of a split is, for a message: `FILE, line N` in a JSON
    Lines or CSV file (the line it starts on; blank lines and the CSV header counted as the readers
    skip them), else `WHERE, row N` (Parquet, a JSON array, a hub split, rows in memory)."""
    path = Path(where)
    if path.suffix in (".jsonl", ".csv") and path.is_file():
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            if path.suffix == ".jsonl":  # lines end at "\n" only, as the JSON Lines readers split them
                rows = (number for number, line in decoded_lines(f.buffer, where, "replace", Stats()) if line.strip())
            else:
                reader = csv.reader(f)
                next(reader, None)  # the header

                def starts():  # the line each record starts on (a quoted cell may span lines)
                    start = reader.line_num + 1
                    for record in reader:
                        if record:
                            yield start
                        start = reader.line_num + 1

                rows = starts()
            for number, line in enumerate(rows, 1):
                if number == row:
                    return f"{where}, line {line}"
    return f"{where}, row {row}"


def _is_integer_like(value: Any) -> bool:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and value.strip().lstrip("-").isdigit()



def _refuse_mixed_labels(values: dict[str, list[Any]], where: dict[str, str]) -> None:
    """Without labels.json, integer labels (0, "1") and names ("sports") in one dataset would
    silently become different classes (`0` and `"sports"` may be the same): refuse, showing both
    and where the first label of the kind with fewer distinct values is."""
    numbers: dict[str, Any] = {}
    names: dict[str, Any] = {}
    for split, vals in values.items():
        for row, v in enumerate(vals, 1):
            (numbers if _is_integer_like(v) else names).setdefault(repr(v), (split, v, row))
    if numbers and names:
        show = lambda d: ", ".join(f"{v!r} ({split})" for split, v, _ in list(d.values())[:5])  # noqa: E731
        split, value, row = next(iter((numbers if len(numbers) <= len(names) else names).values()))
        raise DataError(
            f"{row_place(where[split], row)}: label {value!r}: labels mix integers ({show(numbers)}) and names "
            f"({show(names)}); use one kind, or add a labels.json (class names in index order) beside the data so "
            "integers are indices into it"
        )



def column_values(ds: Dataset, column: str) -> list[Any]:
    """A column's values as one Python list, read in one pass (datasets' lazy Column reads a table a row), decoded
    by its feature as a row read is (a JSON column of mixed types gives back its ints and strings)."""
    return ds.select_columns([column])[:][column]


class ClassTargets:
    """single_label: one class per example."""

    def encode(
        self, dsd: DatasetDict, cfg: DataConfig, source: str, where: dict[str, str], labels_file: Path | None = None,
        given_names: list[str] | None = None,
    ) -> tuple[DatasetDict, list[str]]:
        """Map every split's labels to 0..C-1 and cast to ClassLabel; names from the ClassLabel
        feature, else labels.json (or `given_names`, read the same way), else the sorted distinct
        training labels."""
        feature = dsd["train"].features["label"]
        values = {split: column_values(ds, "label") for split, ds in dsd.items()}
        for split, vals in values.items():
            bad = [row for row, v in enumerate(vals, 1) if v is None or (isinstance(v, (int, np.integer)) and v < 0)]
            if bad:
                raise DataError(
                    f"{row_place(where[split], bad[0])}: no label ({vals[bad[0] - 1]!r}); expected a class name or id "
                    f"for every example ({len(bad)} example(s) without a label in the {split} split)"
                )
        if isinstance(feature, ClassLabel):
            names, to_id = list(feature.names), None
        elif labels_file is not None or given_names is not None:
            names = list(given_names) if given_names is not None else read_label_names(labels_file)
            to_id = {name: i for i, name in enumerate(names)}
            to_id.update({i: i for i in range(len(names))})
        else:
            _refuse_mixed_labels(values, where)
            distinct = sorted(set(values["train"]), key=lambda v: (isinstance(v, str), v))
            names = [str(v) for v in distinct]
            to_id = {v: i for i, v in enumerate(distinct)}
        if to_id is not None:
            for split, vals in values.items():
                unknown = sorted({v for v in vals if v not in to_id}, key=str)
                if unknown:
                    known = (f"{labels_file}" if labels_file is not None
                             else "the given labels" if given_names is not None else "the training split")
                    row = next(row for row, v in enumerate(vals, 1) if v not in to_id)
                    raise DataError(
                        f"{row_place(where[split], row)}: label {vals[row - 1]!r} is not a class ({split} split): "
                        f"label(s) {unknown[:10]} not in the classes of {known} ({names[:20]})"
                    )
            values = {split: [to_id[v] for v in vals] for split, vals in values.items()}
        seen = set(values["train"])
        if len(seen) < 2:
            raise DataError(
                f"{where['train']}: only {len(seen)} class ({[names[i] for i in seen]}) in {len(values['train'])} "
                "examples; a classifier needs at least two classes (check data.label_column and the data)"
            )
        for split in ("validation", "test"):
            if split in values:
                unseen = sorted(set(values[split]) - seen)
                if unseen:
                    row = next(row for row, v in enumerate(values[split], 1) if v not in seen)
                    raise DataError(
                        f"{row_place(where[split], row)}: label {names[values[split][row - 1]]!r} ({split} split): "
                        f"label(s) {[names[i] for i in unseen]} never occur in the training split; the model could "
                        "not learn them"
                    )
        class_label = ClassLabel(names=names)
        out = {}
        for split, ds in dsd.items():
            ds = ds.remove_columns("label").add_column("label", values[split])
            out[split] = ds.cast_column("label", class_label)
        return DatasetDict(out), names

    def encode_eval(self, ds: Dataset, cfg: DataConfig, labels: list[str], labels_file: Path, file: Path) -> Dataset:
        """One labelled file's labels mapped onto a run's classes (by name where the data names them)."""
        values = column_values(ds, "label")
        feature = ds.features["label"]
        names = list(feature.names) if isinstance(feature, ClassLabel) else (
            read_label_names(labels_file) if labels_file.is_file() else None
        )
        index = {name: i for i, name in enumerate(labels)}
        mapped = []
        for v in values:
            if isinstance(v, str):
                name = v
            elif isinstance(v, (int, np.integer)) and names is not None and 0 <= v < len(names):
                name = names[v]
            elif isinstance(v, (int, np.integer)) and 0 <= v < len(labels):
                name = labels[v]  # bare ids: the run's own index space
            else:
                raise DataError(f"{file}: label {v!r} is not a class of this run ({labels})")
            if name not in index:
                raise DataError(f"{file}: label {name!r} is not a class of this run ({labels})")
            mapped.append(index[name])
        ds = ds.remove_columns("label").add_column("label", mapped)
        return ds.cast_column("label", ClassLabel(names=labels))


def _label_names_of(value: Any, delimiter: str) -> list[Any]:
    """One multi-label cell as a list: a list of ids / names, or names in a delimited string."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(delimiter) if part.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]  # a bare id



def _multi_hot(values: list[Any], names: list[str], cfg: DataConfig, where: str) -> list[list[int]]:
    index = {name: i for i, name in enumerate(names)}
    rows = []
    for row, value in enumerate(values, 1):
        ids = []
        for item in _label_names_of(value, cfg.label_delimiter):
            if isinstance(item, str) and item in index:
                ids.append(index[item])
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool) and 0 <= item < len(names):
                ids.append(int(item))
            elif isinstance(item, str) and item.lstrip("-").isdigit() and 0 <= int(item) < len(names):
                ids.append(int(item))
            else:
                raise DataError(
                    f"{row_place(where, row)}: unknown label {item!r}; expected a name of {names[:30]} "
                    f"or an id in 0..{len(names) - 1}"
                )
        if not ids and not cfg.allow_empty_labels:
            raise DataError(
                f"{row_place(where, row)}: empty label list; every multi-label example needs at least one label "
                "(or set data.allow_empty_labels=true)"
            )
        hot = [0] * len(names)
        for i in ids:
            hot[i] = 1
        rows.append(hot)
    return rows



def _floats(values: list[Any], where: str) -> list[float]:
    out = []
    for row, value in enumerate(values, 1):
        try:
            number = float(value) if not isinstance(value, bool) else float("nan")
        except (TypeError, ValueError):
            number = float("nan")
        if not np.isfinite(number):
            raise DataError(f"{row_place(where, row)}: regression target {value!r} is not a finite number; expected "
                            "a real number for every example")
        out.append(number)
    return out



def _multi_label_names(
    dsd: DatasetDict, cfg: DataConfig, labels_file: Path | None, where: str, given_names: list[str] | None = None,
) -> list[str]:
    """Label names: `given_names`, labels.json, else a ClassLabel-of-a-list feature, else every name in train, sorted."""
    if given_names is not None:
        return list(given_names)
    if labels_file is not None:
        return read_label_names(labels_file)
    feature = dsd["train"].features["label"]
    inner = getattr(feature, "feature", None)
    if isinstance(inner, ClassLabel):
        return list(inner.names)
    seen = set()
    for row, value in enumerate(dsd["train"]["label"], 1):
        for item in _label_names_of(value, cfg.label_delimiter):
            if not isinstance(item, str):
                raise DataError(
                    f"{row_place(where, row)}: label id {item!r} without label names; put a labels.json (the names "
                    "in id order) beside the data, or give the names"
                )
            seen.add(item)
    return sorted(seen)



class LabelSetTargets:
    """multi_label: a set of labels per example."""

    def names(self, dsd: DatasetDict, cfg: DataConfig, labels_file: Path | None, where: str,
              given_names: list[str] | None) -> list[str]:
        return _multi_label_names(dsd, cfg, labels_file, where, given_names)

    def column(self, ds: Dataset, cfg: DataConfig, names: list[str], where: str) -> Dataset:
        """Replace `label` by multi-hot [C] ints."""
        values = column_values(ds, "label")
        ds = ds.remove_columns("label").add_column("label", _multi_hot(values, names, cfg, where))
        return ds.cast_column("label", Sequence(Value("int8"), length=len(names)))

    def encode(
        self, dsd: DatasetDict, cfg: DataConfig, source: str, where: dict[str, str], labels_file: Path | None = None,
        given_names: list[str] | None = None,
    ) -> tuple[DatasetDict, list[str]]:
        """Targets checked row by row; the names: the labels (multi_label) or the label column's
        name (regression, one output)."""
        names = self.names(dsd, cfg, labels_file, where["train"], given_names)
        out = {split: self.column(ds, cfg, names, where[split]) for split, ds in dsd.items()}
        self.check(out["train"], names, source)
        return DatasetDict(out), names

    def check(self, train: Dataset, names: list[str], source: str) -> None:
        """A label that never occurs in training is worth a warning (the model cannot learn it)."""
        counts = np.asarray(train["label"], dtype=np.int64).sum(axis=0)
        never = [names[i] for i in np.flatnonzero(counts == 0)]
        if never:
            logger.warning("%s: label(s) %s never occur in the training split", source, never)

    def encode_eval(self, ds: Dataset, cfg: DataConfig, labels: list[str], labels_file: Path, file: Path) -> Dataset:
        return self.column(ds, cfg, labels, str(file))


class ValueTargets(LabelSetTargets):
    """regression: one number per example; the one "label" is the label column's name."""

    def names(self, dsd: DatasetDict, cfg: DataConfig, labels_file: Path | None, where: str,
              given_names: list[str] | None) -> list[str]:
        return [cfg.label_column]

    def column(self, ds: Dataset, cfg: DataConfig, names: list[str], where: str) -> Dataset:
        """Replace `label` by a float."""
        values = column_values(ds, "label")
        ds = ds.remove_columns("label").add_column("label", _floats(values, where))
        return ds.cast_column("label", Value("float32"))

    def check(self, train: Dataset, names: list[str], source: str) -> None:
        return None


TARGETS = {SINGLE_LABEL: ClassTargets(), MULTI_LABEL: LabelSetTargets(), REGRESSION: ValueTargets()}


def targets_of(task: str) -> ClassTargets | LabelSetTargets:
    """The label reader of a task type (data.task)."""
    return TARGETS[task]

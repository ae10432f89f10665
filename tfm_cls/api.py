"""The Python API in scikit-learn's shape: `TextClassifier` wraps the training code of `tfm-cls train`.

    from tfm_cls import TextClassifier

    clf = TextClassifier("trec", train__lr=1e-3, model__num_layers=3)   # stores its arguments only
    clf.fit(texts, labels)            # tfm_cls.train.train(cfg, data) into a run directory -> self, classes_
    clf.predict(["what is a dog?"])   # labels as given to fit (str or int)
    clf.save("runs/mine"); TextClassifier.load("runs/mine").predict_proba(texts)
    clf.export_onnx("model.onnx")     # exported and verified against the PyTorch model

Config overrides are keyword arguments whose dotted key is written with `__` (`train__lr` is
`train.lr`, `seed` is `seed`); `get_params` / `set_params` return and take them like any other
parameter, so `sklearn.base.clone`, `GridSearchCV(param_grid={"train__lr": [...]})` and
`cross_val_score` work. They are checked (like every config) when `fit` builds the config.

`fit` hands the texts to the same `train` as the command line, in memory (tfm_cls.data.sources.
data_from_rows: the checks and label encoding of data files; config.yaml says `data.name:
in-memory`), in `run_dir` (a temporary folder owned by the estimator unless given). Without
`validation`, a stratified seeded share (`data.validation_fraction`) of the texts is held out to
select the best weights; the estimator never carves a test split out of the texts (the run scores
validation only: use `score`).

What differs between task types lives in a `Targets` object (today `SingleLabelTargets`: one
class per text); sentence pairs or multi-label targets plug in as another `Targets` (how labels
are checked and encoded, what a data row holds, how probabilities become predictions) chosen by
`_targets_for`, with `fit`, `predict`, `save` and `load` unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from tfm_cls import runs as R
from tfm_cls.errors import TfmClsError
from tfm_cls.io import read_json, write_json

logger = logging.getLogger(__name__)

CLASSES_FILE = "classes.json"
"""The classes as given to `fit` (ints stay ints), in index order; labels.json holds their names."""
DATA_DIR = "data"
"""Where fit wrote its texts as jsonl before it handed them over in memory; `save` leaves such a copy out."""
SOURCE = "TextClassifier.fit (texts in memory)"
"""What metrics.json and the model card say the data were."""
_FIXED_PARAMS = ("config", "run_dir")


# ---- what a task type decides ----------------------------------------------------------------------


def check_texts(texts: Any, what: str = "texts") -> list[str]:
    """A list of strings, or a ValueError naming what is wrong (sklearn's convention)."""
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"{what}: expected a list of texts, got a single {type(texts).__name__}")
    try:
        items = list(texts)
    except TypeError as err:
        raise ValueError(f"{what}: expected a list of texts, got {type(texts).__name__}") from err
    if not items:
        raise ValueError(f"{what}: expected at least one text, got an empty list")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValueError(f"{what}[{i}]: expected a string, got {type(text).__name__} {text!r:.50}")
    return items


@dataclasses.dataclass
class SingleLabelTargets:
    """One class per text: `classes_` are the sorted unique labels, rows are {text, label index}."""

    classes: np.ndarray

    @classmethod
    def fit(cls, labels: Any, n_texts: int) -> SingleLabelTargets:
        values = _as_array(labels, "labels")
        if len(values) != n_texts:
            raise ValueError(f"texts and labels differ in length: {n_texts} texts, {len(values)} labels")
        try:
            classes = np.unique(values)
        except TypeError as err:
            raise ValueError(f"labels: mixed types cannot be sorted into classes ({err})") from err
        if len(classes) < 2:
            raise ValueError(f"labels: a classifier needs at least two classes, got only {classes.tolist()}")
        return cls(classes)

    def encode(self, labels: Any, what: str = "labels") -> list[int]:
        values = _as_array(labels, what)
        index = np.searchsorted(self.classes, values)
        index = np.clip(index, 0, len(self.classes) - 1)
        unknown = values[self.classes[index] != values]
        if len(unknown):
            raise ValueError(f"{what}: {unknown[:5].tolist()} are not among the classes {self.classes.tolist()}")
        return index.tolist()

    def rows(self, texts: list[str], labels: Any, what: str = "labels") -> list[dict[str, Any]]:
        return [{"text": t, "label": y} for t, y in zip(texts, self.encode(labels, what))]

    def names(self) -> list[str]:
        return [str(c) for c in self.classes]

    def predictions(self, proba: np.ndarray) -> np.ndarray:
        return self.classes[proba.argmax(axis=1)]


def _as_array(labels: Any, what: str) -> np.ndarray:
    if isinstance(labels, (str, bytes)):
        raise ValueError(f"{what}: expected a list of labels, got a single {type(labels).__name__}")
    values = np.asarray(list(labels))
    if values.ndim != 1:
        raise ValueError(f"{what}: expected one label per text (a 1-d list), got shape {values.shape}")
    if len(values) == 0:
        raise ValueError(f"{what}: expected at least one label, got an empty list")
    return values


def _targets_for(config: Any) -> type[SingleLabelTargets]:
    """The Targets type of a config (one today; pairs / multi-label configs will choose theirs)."""
    return SingleLabelTargets


# ---- the estimator -----------------------------------------------------------------------------------


class TextClassifier(ClassifierMixin, BaseEstimator):
    """A text classifier trained by tfm_cls (see the module docstring).

    config: None (the default): the recipe reads the texts given to fit and chooses the config, as
        `tfm-cls train --data DIR` does (tfm_cls.train.plan); or a configs/cls preset name (`trec`, `bbc`,
        ...) or a YAML file (several comma-separated are merged, as `--config` takes them); its data
        section is replaced by the texts given to fit.
    run_dir: where the run is written (kept); None: a temporary folder removed with the estimator.
    **overrides: config overrides, the dotted key written with `__` (`train__lr=1e-3`).
    """

    def __init__(self, config: str | Path | None = None, run_dir: str | Path | None = None, **overrides: Any) -> None:
        self.config = config
        self.run_dir = run_dir
        for key, value in overrides.items():
            setattr(self, key, value)

    # ---- parameters (sklearn's protocol, with the overrides as parameters) -----------------------------

    def _overrides(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items()
                if k not in _FIXED_PARAMS and not k.startswith("_") and not k.endswith("_")}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"config": self.config, "run_dir": self.run_dir, **self._overrides()}

    def set_params(self, **params: Any) -> TextClassifier:
        for key, value in params.items():
            if key.startswith("_") or key.endswith("_"):
                raise ValueError(f"invalid parameter {key!r} for TextClassifier (config keys look like train__lr)")
            setattr(self, key, value)
        return self

    def build_config(self, extra: Sequence[str] = ()) -> Any:
        """The ClassifierConfig of the preset + overrides (+ `extra` dotted overrides); a ValueError
        (ConfigError) names an unknown preset or key."""
        from tfm_cls.config import ClassifierConfig, load_config

        overrides = [f"{key.replace('__', '.')}={json.dumps(_plain(value))}" for key, value in self._overrides().items()]
        planned = getattr(self, "_planned", {}) if self.config is None else {}
        return load_config(ClassifierConfig, self.config, [*overrides, *extra], values=planned)

    def _plan(self, rows: list[dict[str, Any]], validation_rows: list[dict[str, Any]] | None) -> None:
        """config=None: the recipe's choices for these rows (tfm_cls.train.plan, on a temporary copy of
        them as a data folder), kept for build_config; what names files and columns is fit's."""
        from tfm_cls.train.plan import plan_run, profile_data

        with tempfile.TemporaryDirectory(prefix="tfm_cls-plan-") as folder:
            for split, split_rows in (("train", rows), ("validation", validation_rows)):
                if split_rows is not None:
                    with open(Path(folder) / f"{split}.jsonl", "w", encoding="utf-8") as f:
                        f.writelines(json.dumps(_plain(r), ensure_ascii=False) + "\n" for r in split_rows)
            plan = plan_run(profile_data(folder))
        for line in plan.describe():
            logger.info("%s", line)
        data_keys = {"name", "data.path", "data.text_columns", "data.label_column", "data.test_fraction"}
        self._planned = {key: value for key, value in plan.settings.items() if key not in data_keys}

    # ---- training ------------------------------------------------------------------------------------

    def fit(self, texts: Any, labels: Any, validation: tuple[Any, Any] | None = None) -> TextClassifier:
        """Train on `texts` / `labels` (validation: (texts, labels) to select the best weights; None:
        a stratified share of the texts); returns self with classes_, run_dir_ and metrics_."""
        from tfm_cls.data.sources import IN_MEMORY, data_from_rows
        from tfm_cls.train import train

        texts = check_texts(texts)
        # bad preset / override key: fails before anything is written (the recipe's: once it has chosen)
        base = self.build_config() if self.config is not None else None
        targets = _targets_for(base).fit(labels, len(texts))
        rows = targets.rows(texts, labels)
        given_validation = None
        if validation is not None:
            if not isinstance(validation, (tuple, list)) or len(validation) != 2:
                raise ValueError("validation: expected a (texts, labels) pair")
            val_texts = check_texts(validation[0], "validation texts")
            if len(_as_array(validation[1], "validation labels")) != len(val_texts):
                raise ValueError("validation texts and labels differ in length")
            given_validation = targets.rows(val_texts, validation[1], "validation labels")
        if self.config is None:  # the recipe reads the texts
            self._plan(rows, given_validation)
            base = self.build_config()
        val_rows = given_validation
        if validation is None and base.data.validation_fraction > 0:
            rows, val_rows = _hold_out(rows, base.data.validation_fraction, base.data.split_seed)

        self._cleanup()
        if self.run_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tfm_cls-")
            run_dir = Path(self._tmp.name) / "run"
        else:
            run_dir = Path(self.run_dir)
        cfg = self.build_config([
            f"data.name={IN_MEMORY}", "data.config_name=null", "data.path=null", "data.text_columns=[text]",
            "data.label_column=label", "data.rename_columns={}", f"run_dir={run_dir}",
        ])
        # No test split: the estimator has no test set of its own, and none is carved from the texts.
        data = data_from_rows(cfg.data, rows, val_rows, labels=targets.names(), source=SOURCE)
        self.metrics_ = train(cfg, data, overwrite=True)
        write_json(run_dir / CLASSES_FILE, _plain(targets.classes.tolist()))
        self._set_fitted(run_dir, targets)
        return self

    def _set_fitted(self, run_dir: Path, targets: SingleLabelTargets) -> None:
        from tfm_cls.runs import load_run

        self._run = load_run(run_dir)
        self._targets = targets
        self.classes_ = targets.classes
        self.run_dir_ = run_dir

    def _cleanup(self) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
            self._tmp = None

    # ---- prediction ----------------------------------------------------------------------------------

    def _check_fitted(self) -> None:
        if getattr(self, "_run", None) is None:
            raise NotFittedError(
                "This TextClassifier instance is not fitted yet. Call 'fit' with appropriate arguments "
                "before using this estimator (or TextClassifier.load(run_dir))."
            )

    def predict_proba(self, texts: Any) -> np.ndarray:
        """Class probabilities [n_texts, n_classes], columns in the order of classes_."""
        from tfm_cls.classify.predict import predict_proba

        self._check_fitted()
        return predict_proba(self._run, check_texts(texts), batch_size=64)

    def predict(self, texts: Any) -> np.ndarray:
        """The most probable class of each text, as given to fit (shape [n_texts])."""
        self._check_fitted()
        return self._targets.predictions(self.predict_proba(texts))

    # score: ClassifierMixin.score (accuracy of predict)

    def suggest(self, pool: Any, n: int = 20, exclude: Any = ()) -> list[dict[str, Any]]:
        """The n texts of `pool` most worth labelling next, best first: rows {rank, line, text, guess,
        reason, uncertainty} from this model's calibrated scores (tfm_cls.suggest, docs/suggest.md);
        texts in `exclude` (labelled already) and near-copies of them are never suggested."""
        from tfm_cls.suggest.suggester import suggest_texts

        self._check_fitted()
        return suggest_texts(check_texts(pool, "pool"), n, run=self._run, exclude=list(exclude))

    # ---- persistence and export ------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        """Copy the trained run (without its data copy and resumable checkpoint) to `directory`, a
        run directory that `TextClassifier.load`, `tfm-cls predict/eval/export` all read."""
        self._check_fitted()
        directory = Path(directory)
        if directory.resolve() != Path(self.run_dir_).resolve():
            if directory.exists() and any(directory.iterdir()):
                raise ValueError(f"save: {directory} exists and is not empty; choose a new folder")
            shutil.copytree(self.run_dir_, directory, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(DATA_DIR, R.LAST_CHECKPOINT))
        from tfm_cls.classify.card import write_card

        write_card(directory)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> TextClassifier:
        """A fitted TextClassifier from a run directory (of fit/save, or of `tfm-cls train`)."""
        directory = Path(directory)
        try:
            from tfm_cls.runs import load_run

            load_run(directory)
        except TfmClsError as err:
            raise ValueError(str(err)) from err
        names = read_json(directory / R.LABELS_FILE)
        classes = read_json(directory / CLASSES_FILE) if (directory / CLASSES_FILE).is_file() else names
        estimator = cls(config=str(directory / R.CONFIG_FILE), run_dir=str(directory))
        estimator._set_fitted(directory, SingleLabelTargets(np.asarray(classes)))
        return estimator

    def export_onnx(self, path: str | Path | None = None, *, fuse: bool = False) -> Path:
        """Export to ONNX (default RUN/model.onnx) and verify it against the PyTorch model (a
        VerificationError if any stage fails); refreshes the model card."""
        from tfm_cls.classify.card import write_card
        from tfm_cls.export.exporter import export_run
        from tfm_cls.export.verify import verify

        self._check_fitted()

        def check(model: Any, tmp: Path) -> None:  # on the temporary file, before it replaces `path`
            logger.info("%s", verify(model, tmp, ["CPUExecutionProvider"]))

        path = export_run(self.run_dir_, path, fuse=fuse, check=check)
        write_card(self.run_dir_)
        return Path(path)

    def report(self, texts: Any, labels: Any, train: tuple[Any, Any] | None = None) -> Path:
        """Write (or refresh) RUN/report.html on `texts` / `labels` (tfm_cls.report: errors with
        attributions, calibration, accuracy by length); `train`: the (texts, labels) trained on,
        for the likely label errors and the TF-IDF baseline (left out of the page without it).
        Returns the page's path."""
        from tfm_cls.data.sources import data_from_rows
        from tfm_cls.report import write_report

        self._check_fitted()
        rows = self._targets.rows(check_texts(texts), labels)
        train_rows = self._targets.rows(check_texts(train[0], "train texts"), train[1], "train labels") if train else rows
        data = data_from_rows(self._run.config.data, train_rows, rows, labels=self._targets.names(), source=SOURCE)
        given = (data.splits["validation"], data.splits["train"] if train else None, f"{SOURCE} (texts given)")
        return write_report(self.run_dir_, given=given)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_tmp", None)  # a temporary run folder belongs to the process that made it
        return state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.string = True
        tags.input_tags.two_d_array = False
        return tags


def _plain(value: Any) -> Any:
    """numpy scalars and tuples -> JSON values (overrides and classes.json)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _hold_out(rows: list[dict[str, Any]], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """A stratified seeded validation share of `rows` (plain random where a class is too rare)."""
    from sklearn.model_selection import train_test_split

    labels = [r["label"] for r in rows]
    n_val = max(int(round(fraction * len(rows))), len(set(labels)))
    if n_val >= len(rows):
        raise ValueError(f"texts: {len(rows)} texts are too few to hold out a validation share; pass validation=")
    counts = np.bincount(labels)
    stratify = labels if counts[counts > 0].min() >= 2 else None
    train_rows, val_rows = train_test_split(rows, test_size=n_val, random_state=seed, stratify=stratify)
    return train_rows, val_rows

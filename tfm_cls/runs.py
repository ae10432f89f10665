"""The run directory: what a run writes, the check that a folder may take a run, the log file,
and `load_run` to get a trained classifier back.

runs/<name>/
    config.yaml                 resolved ClassifierConfig
    model_config.json           TransformerClassifier constructor arguments (model.config)
    tokenizer.json              tokenizers.Tokenizer with truncation (and padding) set
    labels.json                 class names in index order
    model.safetensors           best weights (by train.best_metric on validation)
    metrics.json                validation and test metrics of the best weights, timing, data report
    classification_report.txt   sklearn report on test
    confusion_matrix.png, training_curves.png
    thresholds.json, per_label_f1.png   multi-label runs (docs/tasks.md)
    wide_offsets.safetensors    wide.warm_start: the training rows' loss offsets, the fitted bias and the
                                out-of-fold training logits the run's choice compares bags on (tfm_cls.bag.warm_start)
    candidates/NAME/            the models the run made and did not ship (tfm_cls.bag.candidates); a
                                second bag's folder also holds its out_of_fold.safetensors
    calibration.json            single-label runs: the fitted temperature (tfm_cls.classify.calibration)
    report.html                 `tfm-cls report` (tfm_cls.report): one self-contained page
    predicted_vs_gold.png               regression runs
    history.json                one entry per evaluation (curves)
    README.md                   model card (tfm_cls.classify.card), refreshed by `tfm-cls eval` / `export`
    tensorboard/                TensorBoard event files (train.tensorboard)
    last.ckpt                   resumable checkpoint (model, optimizer, RNG, step, sampler position)
    train.log
    model.onnx, model.int8.onnx written by `tfm-cls export` / `quantize`; their metadata holds the
                                sha256 of model.safetensors they came from (ExportMetadata.weights_sha256)
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import yaml
from tokenizers import Tokenizer

from tfm_cls.config import ClassifierConfig, from_dict, load_config, to_dict
from tfm_cls.data.tokenizer import load_tokenizer
from tfm_cls.errors import ConfigError, RunDirError, TfmClsError
from tfm_cls.io import read_json
from tfm_cls.runtime.metadata import CANDIDATES_DIR  # RUN/candidates/NAME (tfm_cls.bag.candidates)
from tfm_cls.runtime.metadata import WEIGHTS_FILE as METADATA_WEIGHTS_FILE
from tfm_cls.weights import load_weights

CONFIG_FILE = "config.yaml"
MODEL_CONFIG_FILE = "model_config.json"
TOKENIZER_FILE = "tokenizer.json"
LABELS_FILE = "labels.json"
WEIGHTS_FILE = METADATA_WEIGHTS_FILE
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.json"
REPORT_FILE = "classification_report.txt"
CONFUSION_FILE = "confusion_matrix.png"
CURVES_FILE = "training_curves.png"
PER_LABEL_F1_FILE = "per_label_f1.png"  # multi-label runs
SCATTER_FILE = "predicted_vs_gold.png"  # regression runs
THRESHOLDS_FILE = "thresholds.json"  # multi-label runs: the decision threshold of each label
CALIBRATION_FILE = "calibration.json"  # calibrated runs: {"method": "temperature", "temperature": T, ...}
REPORT_HTML_FILE = "report.html"  # `tfm-cls report`
LAST_CHECKPOINT = "last.ckpt"
LOG_FILE = "train.log"
CARD_FILE = "README.md"  # the model card (tfm_cls.classify.card)
# A pretraining run (tfm-cls pretrain) shares model_config.json, tokenizer.json, metrics.json,
# history.json, last.ckpt and train.log with a classification run, and adds:
PRETRAIN_CONFIG_FILE = "pretrain_config.yaml"
ENCODER_FILE = "encoder.safetensors"  # the encoder: a classifier's keys without head and pooler
MLM_HEAD_FILE = "mlm_head.safetensors"
PRETRAIN_CURVES_FILE = "pretraining_curves.png"
PRETRAIN_FILES = (
    PRETRAIN_CONFIG_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, ENCODER_FILE, MLM_HEAD_FILE, METRICS_FILE,
    HISTORY_FILE, PRETRAIN_CURVES_FILE, LAST_CHECKPOINT, LOG_FILE,
)
# Files derived from the trained weights by `tfm-cls export` / `quantize`: any training start
# (a rerun, --overwrite, --resume) removes them, as they would no longer match the weights.
ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
DERIVED_FILES = (ONNX_FILE, INT8_FILE, "model.int8.quantization.json")
# What a classification run writes: a rerun of the same config removes them first.
CLASSIFIER_FILES = (
    CONFIG_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, LABELS_FILE, WEIGHTS_FILE, METRICS_FILE,
    HISTORY_FILE, REPORT_FILE, CONFUSION_FILE, CURVES_FILE, LAST_CHECKPOINT, LOG_FILE, CARD_FILE, *DERIVED_FILES,
    PER_LABEL_F1_FILE, SCATTER_FILE, THRESHOLDS_FILE, CALIBRATION_FILE, REPORT_HTML_FILE,
)
# Config keys that may differ between a run directory's saved config and a resumed / rerun one:
# they do not change what is trained (train and pretrain share TrainConfig).
IGNORED_FOR_IDENTITY = frozenset(
    {"run_dir", "train.max_minutes", "train.progress", "train.log_every", "train.num_threads", "train.num_workers",
     "train.tensorboard"}
)

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class LoadedRun:
    model: torch.nn.Module
    """TransformerClassifier in eval mode, on CPU, best weights loaded."""
    tokenizer: Tokenizer
    """Truncation to the training max_length and batch-longest [PAD] padding set."""
    labels: list[str]
    """Class names; logits column i is labels[i]."""
    config: ClassifierConfig
    run_dir: Path
    thresholds: list[float] | None = None
    """Multi-label runs: the decision threshold of each label (thresholds.json); else None."""
    temperature: float = 1.0
    """Calibrated runs: the temperature the logits are divided by (calibration.json); else 1.0."""


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and key != "rename_columns":  # rename_columns is a value, not a section
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(dotted key, saved value, current value) for every key that differs, sorted by key; the
    keys in IGNORED_FOR_IDENTITY do not count."""
    a, b = _flatten(saved), _flatten(current)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if k not in IGNORED_FOR_IDENTITY and a.get(k) != b.get(k)]


def read_saved_config(path: Path, cls: type) -> dict[str, Any]:
    """A run directory's saved config file (of config class `cls`) as a mapping, with the keys it
    predates filled in with their defaults and its deprecated keys moved to their new place, so
    that a run written before a key existed or moved still counts as the same run (resume, rerun
    checks); as saved when it no longer loads (the comparison then names the difference)."""
    saved = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    try:
        return to_dict(from_dict(cls, saved, str(path)))
    except (ConfigError, TypeError, ValueError):
        return saved


def prepare_run_dir(
    config: Any, *, config_file: str, run_files: Iterable[str], kind: str, resume: bool, overwrite: bool,
) -> Path:
    """Check that `config.resolved_run_dir()` may take this run, and create it. A folder holding a
    different run (its `config_file` differs) is refused unless `overwrite`; `resume` needs the
    same run and its last checkpoint; a rerun of the same config deletes `run_files` and starts
    over. A folder holding only train.log is a run that failed before it started: reusable.
    A finished run (its metrics.json written) is never deleted by a plain rerun: that needs
    `overwrite`. Files derived from the weights (DERIVED_FILES: ONNX exports) are removed by every
    training start. `kind` ("" or "pretraining ") names the run in the messages."""
    run_dir = config.resolved_run_dir()
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"run_dir {run_dir} is a file, not a folder; choose another run_dir=PATH / name=NAME")
    saved_config = run_dir / config_file
    if resume and not (saved_config.is_file() and (run_dir / LAST_CHECKPOINT).is_file()):
        raise RunDirError(f"--resume: {run_dir} holds no {kind}checkpoint to resume ({LAST_CHECKPOINT} missing)")
    if saved_config.is_file():
        saved = read_saved_config(saved_config, type(config))
        differs = config_differences(saved, to_dict(config))
        if differs and (resume or not overwrite):
            shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in differs[:5])
            raise RunDirError(
                f"{run_dir} holds a different {kind}run ({shown}); "
                + ("resume it with its own config" if resume
                   else "pass --overwrite to replace it, or choose another run_dir=PATH / name=NAME")
            )
        if not resume and not overwrite and not differs and (run_dir / METRICS_FILE).is_file():
            raise RunDirError(
                f"{run_dir} holds a finished {kind}run of this config ({METRICS_FILE} written); nothing was changed. "
                "Pass --overwrite to retrain it from scratch, or choose another run_dir=PATH / name=NAME"
            )
        if not resume:
            logger.warning("%s: replacing the previous run's files", run_dir)
            for name in run_files:
                (run_dir / name).unlink(missing_ok=True)
    elif run_dir.is_dir() and any(p.name != LOG_FILE for p in run_dir.iterdir()) and not overwrite:
        raise RunDirError(
            f"{run_dir} exists and is not empty but holds no {kind or 'tfm_cls '}run ({config_file} missing); "
            "pass --overwrite to write into it anyway, or choose another run_dir=PATH"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    if saved_config.is_file():  # our own run: exports of its earlier weights would be stale
        for name in DERIVED_FILES:
            if (run_dir / name).is_file():
                logger.warning("%s: removing %s (exported from the earlier weights)", run_dir, name)
                (run_dir / name).unlink()
    return run_dir


@contextlib.contextmanager
def log_to_file(path: Path) -> Iterator[None]:
    """Copy this package's log records into `path` (train.log) for the duration."""
    package_logger = logging.getLogger("tfm_cls")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    old_level = package_logger.level
    if package_logger.getEffectiveLevel() > logging.INFO:
        package_logger.setLevel(logging.INFO)
    package_logger.addHandler(handler)
    try:
        yield
    except BaseException as err:
        # The error the command line prints, also in the log: a failed start leaves a log that says why.
        message = f"{type(err).__name__}: {err}" if not isinstance(err, TfmClsError) else str(err)
        handler.handle(logging.LogRecord("tfm_cls", logging.ERROR, __file__, 0, "run failed: %s", (message,), None))
        raise
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(old_level)
        handler.close()


def build_model(model_config: dict[str, Any]) -> torch.nn.Module:
    """A classifier from its constructor arguments (as in `model.config`): a TransformerClassifier,
    or the model without an encoder its `architecture` names (tfm_cls.model.bag)."""
    from tfm_cls.model import BagOfTermsClassifier, TransformerClassifier
    from tfm_cls.model.bag import ARCHITECTURE

    if model_config.get("architecture") == ARCHITECTURE:
        return BagOfTermsClassifier(**model_config)
    return TransformerClassifier(**model_config)




def candidate_folder(run_dir: str | Path, candidate: str | None = None) -> Path:
    """Where a run's model of `candidate` lies (model_config.json, model.safetensors): the run
    directory for the shipped one (None, or its name in metrics.json), RUN/candidates/NAME else."""
    run_dir = Path(run_dir)
    if candidate is None:
        return run_dir
    metrics = read_json(run_dir / METRICS_FILE) if (run_dir / METRICS_FILE).is_file() else {}
    chosen = (metrics.get("candidates") or {}).get("chosen") if isinstance(metrics, dict) else None
    if candidate == chosen:
        return run_dir
    folder = run_dir / CANDIDATES_DIR / candidate
    if not (folder / WEIGHTS_FILE).is_file():
        names = sorted(p.name for p in (run_dir / CANDIDATES_DIR).glob("*") if (p / WEIGHTS_FILE).is_file())
        raise RunDirError(f"{run_dir}: no candidate {candidate!r}; this run has "
                          f"{[chosen, *names] if chosen else names or 'no other candidate'}")
    return folder


def load_run(run_dir: str | Path, device: str | torch.device = "cpu", candidate: str | None = None) -> LoadedRun:
    """Load a finished (or checkpointed) run: model with the best weights, tokenizer, labels, config.
    `candidate`: another of the models the run made (RUN/candidates/NAME) instead of the shipped one."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory {run_dir} does not exist")
    for name in (CONFIG_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, LABELS_FILE, WEIGHTS_FILE):
        if not (run_dir / name).is_file():
            raise RunDirError(f"{run_dir} is not a finished run: {name} is missing")
    try:
        config = load_config(ClassifierConfig, run_dir / CONFIG_FILE)
    except ConfigError as err:
        raise RunDirError(f"{run_dir / CONFIG_FILE}: {err}") from err
    labels = read_json(run_dir / LABELS_FILE)
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise RunDirError(f"{run_dir / LABELS_FILE}: expected a JSON list of class names")
    folder = candidate_folder(run_dir, candidate)
    try:
        model = build_model(read_json(folder / MODEL_CONFIG_FILE))
    except (TypeError, ValueError) as err:  # a hand-edited config: an unknown key, a bad value
        raise RunDirError(f"{folder / MODEL_CONFIG_FILE}: {err}") from err
    load_weights(model, folder / WEIGHTS_FILE)
    model.to(device).eval()
    tokenizer = load_tokenizer(run_dir / TOKENIZER_FILE)
    thresholds = None  # a candidate's own decision rule (and no calibration unless its folder has one)
    if (folder / THRESHOLDS_FILE).is_file():
        saved = read_json(folder / THRESHOLDS_FILE)
        if not isinstance(saved, dict) or list(saved) != labels:
            raise RunDirError(f"{folder / THRESHOLDS_FILE}: expected one threshold for each label of {LABELS_FILE}")
        thresholds = [float(v) for v in saved.values()]
    return LoadedRun(model=model, tokenizer=tokenizer, labels=labels, config=config, run_dir=run_dir,
                     thresholds=thresholds, temperature=read_temperature(folder))


def read_temperature(run_dir: Path) -> float:
    """The run's calibration temperature (calibration.json), 1.0 for a run without one."""
    path = run_dir / CALIBRATION_FILE
    if not path.is_file():
        return 1.0
    saved = read_json(path)
    value = saved.get("temperature") if isinstance(saved, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise RunDirError(f"{path}: expected {{\"temperature\": a positive number, ...}}, found {saved!r}")
    return float(value)

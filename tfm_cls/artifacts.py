"""The run directory: what a training run writes, and `load_run` to get a trained model back.

runs/<name>/
    config.yaml                 resolved ClassifierConfig
    model_config.json           TransformerClassifier constructor arguments (model.config)
    tokenizer.json              tokenizers.Tokenizer with truncation (and padding) set
    labels.json                 class names in index order
    model.safetensors           best weights (by train.best_metric on validation)
    metrics.json                validation and test metrics of the best weights, timing, data report
    classification_report.txt   sklearn report on test
    confusion_matrix.png, training_curves.png
    history.json                one entry per evaluation (curves)
    last.ckpt                   resumable checkpoint (model, optimizer, RNG, step, sampler position)
    train.log
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from tfm_cls.checkpoint import atomic_path, load_weights
from tfm_cls.config import ClassifierConfig, ConfigError, load_config
from tfm_cls.tokenizer import load_tokenizer

CONFIG_FILE = "config.yaml"
MODEL_CONFIG_FILE = "model_config.json"
TOKENIZER_FILE = "tokenizer.json"
LABELS_FILE = "labels.json"
WEIGHTS_FILE = "model.safetensors"
METRICS_FILE = "metrics.json"
HISTORY_FILE = "history.json"
REPORT_FILE = "classification_report.txt"
CONFUSION_FILE = "confusion_matrix.png"
CURVES_FILE = "training_curves.png"
LAST_CHECKPOINT = "last.ckpt"
LOG_FILE = "train.log"


class RunDirError(ValueError):
    """A run directory is missing a file, or holds something other than expected."""


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


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise RunDirError(f"{path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RunDirError(f"{path}: invalid JSON ({err})") from err


def build_model(model_config: dict[str, Any]) -> torch.nn.Module:
    """A TransformerClassifier from its constructor arguments (as in `model.config`)."""
    from tfm_cls.model import TransformerClassifier

    return TransformerClassifier(**model_config)


def load_run(run_dir: str | Path, device: str | torch.device = "cpu") -> LoadedRun:
    """Load a finished (or checkpointed) run: model with the best weights, tokenizer, labels, config."""
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
    model = build_model(read_json(run_dir / MODEL_CONFIG_FILE))
    load_weights(model, run_dir / WEIGHTS_FILE)
    model.to(device).eval()
    tokenizer = load_tokenizer(run_dir / TOKENIZER_FILE)
    return LoadedRun(model=model, tokenizer=tokenizer, labels=labels, config=config, run_dir=run_dir)

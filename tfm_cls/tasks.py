"""The task types (`data.task`): what each head outputs, its loss, its predictions and metrics.

    single_label   C logits -> softmax; cross-entropy; accuracy / macro-F1     (the default)
    multi_label    C logits -> one sigmoid per label; BCE (optional positive-class weights);
                   a label is predicted when its probability reaches its threshold (tuned on
                   validation per label, or one global threshold, or a fixed one); micro- and
                   macro-F1, subset accuracy, per-label precision / recall / F1 / support
    regression     1 output, the value itself; MSE or Huber; Pearson, Spearman, MSE

One `Head` object per task is used by training (tfm_cls.classification), evaluation and prediction
(tfm_cls.predict, `tfm-cls eval`), and the ONNX exporter's metadata, so nothing else branches on
the task. Targets: single_label int64 [N], multi_label float32 multi-hot [N, C], regression
float32 [N].
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfm_cls.metrics import (
    classification_metrics,
    multi_label_metrics,
    multi_label_report,
    regression_metrics,
    regression_report,
    report_text,
)

logger = logging.getLogger(__name__)

SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label", "multi_label", "regression"
TASKS = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)
THRESHOLDS_FILE = "thresholds.json"  # as tfm_cls.runs.THRESHOLDS_FILE (runs imports no task code)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---- multi-label decisions ---------------------------------------------------------------------------


def best_threshold(scores: np.ndarray, targets: np.ndarray, default: float = 0.5) -> tuple[float, float]:
    """(threshold, F1) maximising F1 of `scores >= threshold` against binary `targets` (1-D).

    Exact, not a grid: sorted by score, predicting the top k positive gives F1 = 2 TP_k /
    (k + P); every k that falls between two distinct scores is tried, and the threshold is the
    midpoint of the two. Without any positive target, `default` (F1 0)."""
    scores, targets = np.asarray(scores, dtype=np.float64).ravel(), np.asarray(targets).ravel() > 0.5
    positives = int(targets.sum())
    if positives == 0 or len(scores) == 0:
        return default, 0.0
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], targets[order]
    tp = np.cumsum(t)  # [N] true positives when the top k = 1..N are predicted
    k = np.arange(1, len(s) + 1)
    f1 = 2 * tp / (k + positives)
    # A cut after position k-1 is only realisable by a threshold when the next score is lower.
    cut = np.append(s[:-1] > s[1:], True)
    f1 = np.where(cut, f1, -1.0)
    best = int(np.argmax(f1))
    below = s[best + 1] if best + 1 < len(s) else s[best] - 1.0
    return float((s[best] + below) / 2), float(f1[best])


def tune_thresholds(probs: np.ndarray, targets: np.ndarray, mode: str, fixed: float = 0.5) -> np.ndarray:
    """Thresholds [C] for probabilities [N, C] against multi-hot targets [N, C]: `per_label`
    (each label's F1-optimal threshold), `global` (one threshold maximising micro-F1) or `fixed`."""
    num_labels = probs.shape[1]
    if mode == "fixed":
        return np.full(num_labels, fixed, dtype=np.float64)
    if mode == "global":
        threshold, _ = best_threshold(probs.ravel(), targets.ravel(), fixed)
        return np.full(num_labels, threshold, dtype=np.float64)
    if mode != "per_label":
        raise ValueError(f"threshold mode must be per_label, global or fixed, got {mode!r}")
    return np.array([best_threshold(probs[:, j], targets[:, j], fixed)[0] for j in range(num_labels)])


def decide(probs: np.ndarray, thresholds: np.ndarray, ensure_label: bool) -> np.ndarray:
    """Multi-hot int predictions [N, C]: probability >= threshold; with `ensure_label` a row
    with no label over its threshold gets its most probable label."""
    pred = (probs >= np.asarray(thresholds)[None, :]).astype(np.int64)  # [N, C]
    if ensure_label and len(pred):
        empty = pred.sum(axis=1) == 0
        pred[empty, probs[empty].argmax(axis=1)] = 1
    return pred


# ---- the heads -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Head:
    """The single-label head; the other tasks subclass it. Built from a ClassifierConfig by `head_for`."""

    task: ClassVar[str] = SINGLE_LABEL
    label_smoothing: float = 0.0
    summary_keys: ClassVar[tuple[str, ...]] = ("accuracy", "macro_f1", "loss")
    """The metrics `tfm-cls train` prints and the log line shows."""
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "accuracy", "macro_f1")
    """Validation metrics the engine may select on (train.best_metric)."""

    def num_outputs(self, num_labels: int) -> int:
        return num_labels

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """logits [B, C], targets [B] -> mean loss []."""
        return F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing)

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """What users see per output: softmax probabilities [N, C]."""
        return softmax(logits)

    def torch_scores(self, logits: Tensor) -> Tensor:
        """`scores` in torch (the ONNX graph's second output)."""
        return logits.softmax(dim=-1)

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        loss = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(targets)).item()
        return {"loss": loss, **classification_metrics(targets, logits.argmax(-1), labels)}

    def describe(self, m: dict[str, Any]) -> str:
        return f"loss {m['loss']:.4f} accuracy {m['accuracy']:.4f} macro-F1 {m['macro_f1']:.4f}"

    def records(self, logits: np.ndarray, labels: list[str]) -> list[dict[str, Any]]:
        """One prediction record per row (for `tfm-cls predict`)."""
        out = []
        for row in self.scores(logits):
            best = int(row.argmax())
            out.append({"label": labels[best], "score": float(row[best]),
                        "probabilities": {name: float(p) for name, p in zip(labels, row)}})
        return out

    def export_metadata(self) -> dict[str, Any]:
        return {"tfm_cls.head": self.task}


@dataclasses.dataclass
class MultiLabelHead(Head):
    task: ClassVar[str] = MULTI_LABEL
    thresholds_mode: str = "per_label"
    fixed_threshold: float = 0.5
    ensure_label: bool = True
    pos_weight: Tensor | None = None
    """[C] weight of each label's positive term in the BCE (None: 1)."""
    thresholds: np.ndarray | None = None
    """[C] decision thresholds; None until tuned (then `fixed_threshold` everywhere)."""
    summary_keys: ClassVar[tuple[str, ...]] = ("micro_f1", "macro_f1", "subset_accuracy", "loss")
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "micro_f1", "macro_f1", "subset_accuracy")

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        weight = None if self.pos_weight is None else self.pos_weight.to(logits.device)
        return F.binary_cross_entropy_with_logits(logits.float(), targets.float(), pos_weight=weight)

    def scores(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(logits)

    def torch_scores(self, logits: Tensor) -> Tensor:
        return torch.sigmoid(logits)

    def current_thresholds(self, num_labels: int) -> np.ndarray:
        return self.thresholds if self.thresholds is not None else np.full(num_labels, self.fixed_threshold)

    def tune(self, logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Set (and return) the thresholds from validation logits [N, C] and multi-hot targets."""
        self.thresholds = tune_thresholds(self.scores(logits), targets, self.thresholds_mode, self.fixed_threshold)
        return self.thresholds

    def predict(self, logits: np.ndarray) -> np.ndarray:
        return decide(self.scores(logits), self.current_thresholds(logits.shape[1]), self.ensure_label)

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        loss = self.loss(torch.from_numpy(logits), torch.from_numpy(targets)).item()
        return {"loss": loss, **multi_label_metrics(targets, self.predict(logits), labels),
                "thresholds": {name: float(t) for name, t in zip(labels, self.current_thresholds(len(labels)))}}

    def describe(self, m: dict[str, Any]) -> str:
        return (f"loss {m['loss']:.4f} micro-F1 {m['micro_f1']:.4f} macro-F1 {m['macro_f1']:.4f} "
                f"subset accuracy {m['subset_accuracy']:.4f}")

    def records(self, logits: np.ndarray, labels: list[str]) -> list[dict[str, Any]]:
        probs, pred = self.scores(logits), self.predict(logits)
        out = []
        for row, chosen in zip(probs, pred):
            picked = [j for j in np.argsort(-row, kind="stable") if chosen[j]]
            out.append({"labels": [labels[j] for j in picked], "scores": [float(row[j]) for j in picked],
                        "probabilities": {name: float(p) for name, p in zip(labels, row)}})
        return out

    def export_metadata(self) -> dict[str, Any]:
        thresholds = self.thresholds if self.thresholds is not None else None
        return {"tfm_cls.head": self.task, "tfm_cls.ensure_label": self.ensure_label,
                "tfm_cls.thresholds": None if thresholds is None else [float(t) for t in thresholds],
                "tfm_cls.fixed_threshold": self.fixed_threshold}


@dataclasses.dataclass
class RegressionHead(Head):
    task: ClassVar[str] = REGRESSION
    loss_name: str = "mse"
    huber_delta: float = 1.0
    summary_keys: ClassVar[tuple[str, ...]] = ("pearson", "spearman", "mse", "loss")
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "pearson", "spearman", "mse")

    def num_outputs(self, num_labels: int) -> int:
        return 1

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        value = logits.float()[:, 0]  # [B]
        if self.loss_name == "huber":
            return F.huber_loss(value, targets.float(), delta=self.huber_delta)
        return F.mse_loss(value, targets.float())

    def scores(self, logits: np.ndarray) -> np.ndarray:
        return logits[:, 0]

    def torch_scores(self, logits: Tensor) -> Tensor:
        return logits[:, 0]

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        loss = self.loss(torch.from_numpy(logits), torch.from_numpy(targets)).item()
        return {"loss": loss, **regression_metrics(targets, logits[:, 0])}

    def describe(self, m: dict[str, Any]) -> str:
        return f"loss {m['loss']:.4f} Pearson {m['pearson']:.4f} Spearman {m['spearman']:.4f} MSE {m['mse']:.4f}"

    def records(self, logits: np.ndarray, labels: list[str]) -> list[dict[str, Any]]:
        return [{"value": float(v)} for v in logits[:, 0]]


HEAD_TYPES: dict[str, type[Head]] = {SINGLE_LABEL: Head, MULTI_LABEL: MultiLabelHead, REGRESSION: RegressionHead}


def positive_weights(targets: np.ndarray, max_weight: float = 100.0) -> Tensor:
    """`balanced` BCE positive-class weights [C]: negatives / positives per label (as
    torch.nn.BCEWithLogitsLoss's docs suggest), clipped to `max_weight`; 1 for a label never positive."""
    pos = targets.sum(axis=0)
    neg = len(targets) - pos
    weight = np.where(pos > 0, neg / np.maximum(pos, 1), 1.0)
    return torch.tensor(np.clip(weight, 1e-3, max_weight), dtype=torch.float32)


def head_for(cfg: Any, train_targets: np.ndarray | None = None, thresholds: np.ndarray | None = None) -> Head:
    """The head of a ClassifierConfig (`data.task` and its `multi_label` / `regression` sections).
    `train_targets` give the `balanced` positive weights; `thresholds` restore a run's tuned ones."""
    task = cfg.data.task
    if task == MULTI_LABEL:
        ml = cfg.multi_label
        pos_weight = None
        if ml.pos_weight == "balanced" and train_targets is not None:
            pos_weight = positive_weights(train_targets)
        return MultiLabelHead(thresholds_mode=ml.thresholds, fixed_threshold=ml.threshold,
                              ensure_label=ml.ensure_label, pos_weight=pos_weight,
                              thresholds=None if thresholds is None else np.asarray(thresholds, dtype=np.float64))
    if task == REGRESSION:
        return RegressionHead(loss_name=cfg.regression.loss, huber_delta=cfg.regression.huber_delta)
    return Head(label_smoothing=cfg.train.label_smoothing)




def task_report(head: Head, targets: np.ndarray, logits: np.ndarray, labels: list[str]) -> str:
    """The text report of a split (sklearn's classification report; regression: its metrics)."""
    if isinstance(head, MultiLabelHead):
        return multi_label_report(targets, head.predict(logits), labels)
    if isinstance(head, RegressionHead):
        return regression_report(targets, head.scores(logits))
    return report_text(targets, logits.argmax(-1), labels)

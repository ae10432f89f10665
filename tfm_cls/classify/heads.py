"""The task types (`data.task`): what each head outputs, its loss, its predictions and metrics.

    single_label   C logits -> softmax; cross-entropy; accuracy / macro-F1     (the default)
    multi_label    C logits -> one sigmoid per label; BCE (optional positive-class weights);
                   a label is predicted when its probability reaches its threshold (tuned on
                   validation per label, or one global threshold, or a fixed one); micro- and
                   macro-F1, subset accuracy, per-label precision / recall / F1 / support
    regression     1 output, the value itself; MSE or Huber; Pearson, Spearman, MSE

One `Head` object per task is used by training (tfm_cls.classify.task), evaluation and prediction
(tfm_cls.classify.predict, `tfm-cls eval`), and the ONNX exporter's metadata, so nothing else branches on
the task. Targets: single_label int64 [N], multi_label float32 multi-hot [N, C], regression
float32 [N].
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfm_cls import runs as R
from tfm_cls.classify.metrics import (
    classification_metrics,
    confusion,
    multi_label_metrics,
    multi_label_report,
    regression_metrics,
    regression_report,
    report_text,
)
from tfm_cls.errors import ConfigError
from tfm_cls.io import write_json, write_text
from tfm_cls.runtime.heads import (
    MULTI_LABEL,
    REGRESSION,
    SINGLE_LABEL,
    MultiLabel,
    Regression,
    SingleLabel,
)

logger = logging.getLogger(__name__)

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


def tune_thresholds(probs: np.ndarray, targets: np.ndarray, mode: str, fixed: float = 0.5,
                    min_positives: int = 0) -> np.ndarray:
    """Thresholds [C] for probabilities [N, C] against multi-hot targets [N, C]: `per_label`
    (each label's F1-optimal threshold; with `min_positives`, only labels with that many positives
    get their own, the others share `global`'s), `global` (one
    threshold maximising micro-F1) or `fixed`."""
    num_labels = probs.shape[1]
    if mode == "fixed":
        return np.full(num_labels, fixed, dtype=np.float64)
    if mode == "global":
        threshold, _ = best_threshold(probs.ravel(), targets.ravel(), fixed)
        return np.full(num_labels, threshold, dtype=np.float64)
    if mode != "per_label":
        raise ValueError(f"threshold mode must be per_label, global or fixed, got {mode!r}")
    own = (np.asarray(targets) > 0.5).sum(axis=0) >= min_positives  # [C] labels with a threshold of their own
    thresholds = np.array([best_threshold(probs[:, j], targets[:, j], fixed)[0] if own[j] else fixed
                           for j in range(num_labels)])
    if not own.all():
        shared, _ = best_threshold(probs.ravel(), np.asarray(targets).ravel(), fixed)  # `global`'s
        thresholds[~own] = shared
    return thresholds


# ---- the heads -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Head(SingleLabel):
    """The single-label head; the other tasks subclass it. Built from a ClassifierConfig by `head_for`.
    Scores, decisions and output rows are the runtime's (tfm_cls.runtime.heads); a training head
    adds its loss, its metrics and their names, and its report."""

    label_smoothing: float = 0.0
    class_weight: Tensor | None = None
    """[C] weight of each class in the training cross-entropy (train.class_weight; None: 1 each)."""
    summary_keys: ClassVar[tuple[str, ...]] = ("accuracy", "macro_f1", "loss")
    """The metrics `tfm-cls train` prints and the log line shows."""
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "accuracy", "macro_f1")
    """Validation metrics the engine may select on (train.best_metric)."""

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """logits [B, C], targets [B] -> mean loss [] (weighted: sum of w[y] * CE / sum of w[y], as torch)."""
        return F.cross_entropy(logits, targets, weight=_on(self.class_weight, logits),
                               label_smoothing=self.label_smoothing)

    @property
    def loss_weights(self) -> Tensor | None:
        """The [C] loss weights this head trains with (the model card records them), or None."""
        return self.class_weight

    weights_key: ClassVar[str] = "train.class_weight"
    """The config key of `loss_weights`."""

    def weights_record(self, labels: list[str]) -> dict[str, Any]:
        """metrics.json's `loss_weights` ({key, weights: {label: weight}}), or nothing when unweighted."""
        weights = self.loss_weights
        if weights is None:
            return {}
        return {"loss_weights": {"key": self.weights_key,
                                 "weights": {name: float(w) for name, w in zip(labels, weights.tolist())}}}

    def torch_scores(self, logits: Tensor) -> Tensor:
        """`scores` in torch (the ONNX graph's second output), of logits / temperature."""
        return (logits if self.temperature == 1.0 else logits / self.temperature).softmax(dim=-1)

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        """The loss is the NLL of the scores users see (logits / temperature; a calibrated run's
        test loss is its calibrated NLL)."""
        loss = F.cross_entropy(torch.from_numpy(self.scaled(logits)), torch.from_numpy(targets)).item()
        return {"loss": loss, **classification_metrics(targets, logits.argmax(-1), labels)}

    def describe(self, m: dict[str, Any]) -> str:
        return f"loss {m['loss']:.4f} accuracy {m['accuracy']:.4f} macro-F1 {m['macro_f1']:.4f}"

    def tune(self, logits: np.ndarray, targets: np.ndarray) -> np.ndarray | None:
        """Fit the decision rule on validation logits and targets (multi-label: thresholds); nothing here."""
        return None

    def report(self, targets: np.ndarray, logits: np.ndarray, labels: list[str]) -> str:
        """The text report of a split (scikit-learn's classification report)."""
        return report_text(targets, logits.argmax(-1), labels)

    distillable: ClassVar[bool] = True
    """`tfm-cls distill` has a transfer set for this task (multi-label: not yet)."""
    calibratable: ClassVar[bool] = True
    """`train.calibration: auto` fits a temperature for this task (tfm_cls.classify.calibration says why
    only single-label)."""
    value_target: ClassVar[bool] = False
    """Targets are numbers to fit, not class ids or label sets (a transfer text without gold is NaN)."""

    def start_output(self, model: torch.nn.Module, train_targets: Any) -> None:
        """Initialise the output layer from the training targets before training; nothing here."""

    records_task: ClassVar[bool] = False
    """metrics.json names the task and whether the run reads pairs (single-label runs, whose
    metrics.json predates task types, do not)."""

    def save_decision(self, run_dir: Path, labels: list[str]) -> None:
        """Write what a run needs to decide as it did (multi-label: thresholds.json); nothing here."""

    def write_test_results(
        self, run_dir: Path, targets: np.ndarray, logits: np.ndarray, metrics: dict[str, Any], labels: list[str]
    ) -> Path | None:
        """The test split's report and figure (the confusion matrix); returns the figure to show
        on TensorBoard, if any."""
        from tfm_cls.classify.plots import plot_confusion_matrix

        predictions = logits.argmax(-1)
        write_text(run_dir / R.REPORT_FILE, report_text(targets, predictions, labels))
        plot_confusion_matrix(confusion(targets, predictions, len(labels)), labels, run_dir / R.CONFUSION_FILE)
        return run_dir / R.CONFUSION_FILE

    def soft_loss(self, student: Tensor, teacher: Tensor, kind: str, temperature: float) -> Tensor:
        """Distillation: per-example loss [B] of student outputs [B, C] against the teacher's:
        KL(softmax(t / T) || softmax(s / T)) * T^2, or (kind `mse`) the MSE of the logits."""
        if kind == "mse":
            return ((student.float() - teacher.float()) ** 2).mean(-1)
        t = temperature
        log_p_student = F.log_softmax(student.float() / t, dim=-1)  # [B, C]
        log_p_teacher = F.log_softmax(teacher.float() / t, dim=-1)  # [B, C]
        kl = F.kl_div(log_p_student, log_p_teacher, reduction="none", log_target=True).sum(-1)  # [B]
        return kl * t * t

    def gold_loss(self, student: Tensor, gold: Tensor) -> Tensor:
        """Distillation: per-example loss [B] against gold class ids [B] (-1 where none), w[y] * CE
        with the class weights."""
        return F.cross_entropy(student.float(), gold.clamp(min=0), weight=_on(self.class_weight, student),
                               reduction="none")


@dataclasses.dataclass
class MultiLabelHead(MultiLabel, Head):
    thresholds_mode: str = "per_label"
    min_positives: int = 0
    """per_label: the validation positives a label needs for a threshold of its own (multi_label.min_positives)."""
    pos_weight: Tensor | None = None
    """[C] weight of each label's positive term in the BCE (None: 1)."""
    prior_init: bool = True
    """Start each label's output bias at the log-odds of its training frequency (`start_output`)."""
    summary_keys: ClassVar[tuple[str, ...]] = ("micro_f1", "macro_f1", "subset_accuracy", "loss")
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "micro_f1", "macro_f1", "subset_accuracy")

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(logits.float(), targets.float(), pos_weight=_on(self.pos_weight, logits))

    @property
    def loss_weights(self) -> Tensor | None:
        return self.pos_weight

    weights_key: ClassVar[str] = "multi_label.pos_weight"

    def torch_scores(self, logits: Tensor) -> Tensor:
        return torch.sigmoid(logits if self.temperature == 1.0 else logits / self.temperature)

    def tune(self, logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Set (and return) the thresholds from validation logits [N, C] and multi-hot targets."""
        self.thresholds = tune_thresholds(self.scores(logits), targets, self.thresholds_mode, self.fixed_threshold,
                                          self.min_positives)
        return self.thresholds

    def predict(self, logits: np.ndarray) -> np.ndarray:
        """Multi-hot int predictions [N, C] of logits."""
        return self.predicted(self.scores(logits))

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        loss = self.loss(torch.from_numpy(logits), torch.from_numpy(targets)).item()
        return {"loss": loss, **multi_label_metrics(targets, self.predict(logits), labels),
                "thresholds": {name: float(t) for name, t in zip(labels, self.current_thresholds(len(labels)))}}

    def describe(self, m: dict[str, Any]) -> str:
        return (f"loss {m['loss']:.4f} micro-F1 {m['micro_f1']:.4f} macro-F1 {m['macro_f1']:.4f} "
                f"subset accuracy {m['subset_accuracy']:.4f}")

    def report(self, targets: np.ndarray, logits: np.ndarray, labels: list[str]) -> str:
        return multi_label_report(targets, self.predict(logits), labels)

    records_task: ClassVar[bool] = True
    distillable: ClassVar[bool] = False
    calibratable: ClassVar[bool] = False

    def start_output(self, model: torch.nn.Module, train_targets: Any) -> None:
        """Each label's bias starts at the log-odds of its training frequency (`prior_logits`), so
        every sigmoid starts at its label's base rate instead of 0.5. The prior initialisation of
        rare classes in detection (Lin et al. 2017, focal loss): from a zero bias, a label on 1 % of
        the texts needs its logit moved to -4.6, and AdamW moves it about one learning rate a step,
        so the first thousands of steps would be spent learning the base rates (the encoder's
        features pulled down with them) instead of telling texts apart."""
        if not self.prior_init:
            return
        bias = torch.from_numpy(prior_logits(np.asarray(list(train_targets), dtype=np.float64)))
        with torch.no_grad():
            model.head.bias.copy_(bias.to(model.head.bias.dtype))

    def save_decision(self, run_dir: Path, labels: list[str]) -> None:
        write_json(run_dir / R.THRESHOLDS_FILE, dict(zip(labels, map(float, self.current_thresholds(len(labels))))))

    def write_test_results(
        self, run_dir: Path, targets: np.ndarray, logits: np.ndarray, metrics: dict[str, Any], labels: list[str]
    ) -> Path | None:
        """The report and the per-label F1 figure."""
        from tfm_cls.classify.plots import plot_per_label_f1

        write_text(run_dir / R.REPORT_FILE, self.report(targets, logits, labels))
        plot_per_label_f1(metrics["per_label"], run_dir / R.PER_LABEL_F1_FILE)
        return None

    def soft_loss(self, student: Tensor, teacher: Tensor, kind: str, temperature: float) -> Tensor:
        """BCE against sigmoid(t / T) * T^2, or the MSE of the logits."""
        if kind == "mse":
            return ((student.float() - teacher.float()) ** 2).mean(-1)
        t = temperature
        targets = torch.sigmoid(teacher.float() / t)
        bce = F.binary_cross_entropy_with_logits(student.float() / t, targets, reduction="none").mean(-1)
        return bce * t * t

    def gold_loss(self, student: Tensor, gold: Tensor) -> Tensor:
        """BCE on 0/1 targets [B, C] (with the positive-class weights)."""
        return F.binary_cross_entropy_with_logits(student.float(), gold.float(), pos_weight=_on(self.pos_weight, student),
                                                  reduction="none").mean(-1)


@dataclasses.dataclass
class RegressionHead(Regression, Head):
    loss_name: str = "mse"
    huber_delta: float = 1.0
    summary_keys: ClassVar[tuple[str, ...]] = ("pearson", "spearman", "mse", "loss")
    metric_names: ClassVar[tuple[str, ...]] = ("loss", "pearson", "spearman", "mse")

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        value = logits.float()[:, 0]  # [B]
        if self.loss_name == "huber":
            return F.huber_loss(value, targets.float(), delta=self.huber_delta)
        return F.mse_loss(value, targets.float())

    def torch_scores(self, logits: Tensor) -> Tensor:
        return logits[:, 0]

    def metrics(self, logits: np.ndarray, targets: np.ndarray, labels: list[str]) -> dict[str, Any]:
        loss = self.loss(torch.from_numpy(logits), torch.from_numpy(targets)).item()
        return {"loss": loss, **regression_metrics(targets, logits[:, 0])}

    def describe(self, m: dict[str, Any]) -> str:
        return f"loss {m['loss']:.4f} Pearson {m['pearson']:.4f} Spearman {m['spearman']:.4f} MSE {m['mse']:.4f}"

    def report(self, targets: np.ndarray, logits: np.ndarray, labels: list[str]) -> str:
        return regression_report(targets, self.scores(logits))

    records_task: ClassVar[bool] = True
    value_target: ClassVar[bool] = True
    calibratable: ClassVar[bool] = False

    def start_output(self, model: torch.nn.Module, train_targets: Any) -> None:
        """The output starts at the mean training target, so the first steps learn the signal, not the offset."""
        with torch.no_grad():
            model.head.bias.fill_(float(np.mean(train_targets)))

    def write_test_results(
        self, run_dir: Path, targets: np.ndarray, logits: np.ndarray, metrics: dict[str, Any], labels: list[str]
    ) -> Path | None:
        """The report and the predicted-vs-gold scatter."""
        from tfm_cls.classify.plots import plot_regression_scatter

        write_text(run_dir / R.REPORT_FILE, self.report(targets, logits, labels))
        plot_regression_scatter(targets, self.scores(logits), run_dir / R.SCATTER_FILE, labels[0])
        return None

    def soft_loss(self, student: Tensor, teacher: Tensor, kind: str, temperature: float) -> Tensor:
        """MSE to the teacher's value (whatever `kind`)."""
        return ((student.float() - teacher.float()) ** 2).mean(-1)

    def gold_loss(self, student: Tensor, gold: Tensor) -> Tensor:
        """MSE to the gold value (gold [B] or [B, 1])."""
        return ((student.float() - gold.float().reshape(student.shape)) ** 2).mean(-1)


HEAD_TYPES: dict[str, type[Head]] = {SINGLE_LABEL: Head, MULTI_LABEL: MultiLabelHead, REGRESSION: RegressionHead}


def prior_logits(targets: np.ndarray) -> np.ndarray:
    """Log-odds [C] of each label's frequency in multi-hot `targets` [N, C], the frequency clipped
    to [1 / (N + 1), N / (N + 1)] so a label never (or always) positive gets a finite bias."""
    n = len(targets)
    frequency = np.clip(targets.mean(axis=0), 1.0 / (n + 1), n / (n + 1))
    return np.log(frequency / (1.0 - frequency))


def positive_weights(targets: np.ndarray, max_weight: float = 100.0) -> Tensor:
    """`balanced` BCE positive-class weights [C]: negatives / positives per label (as
    torch.nn.BCEWithLogitsLoss's docs suggest), clipped to `max_weight`; 1 for a label never positive."""
    pos = targets.sum(axis=0)
    neg = len(targets) - pos
    weight = np.where(pos > 0, neg / np.maximum(pos, 1), 1.0)
    return torch.tensor(np.clip(weight, 1e-3, max_weight), dtype=torch.float32)


def balanced_class_weights(targets: np.ndarray, num_classes: int) -> Tensor:
    """`balanced` cross-entropy class weights [C] of class ids `targets` [N]: n / (C * count of
    the class), scikit-learn's compute_class_weight('balanced'); rows without a label (< 0, a
    distillation transfer text) are not counted; 1 for a class absent from them."""
    ids = np.asarray(targets).ravel()
    ids = ids[ids >= 0].astype(np.int64)
    counts = np.bincount(ids, minlength=num_classes)[:num_classes].astype(np.float64)
    weight = np.where(counts > 0, len(ids) / (num_classes * np.maximum(counts, 1)), 1.0)
    return torch.tensor(weight, dtype=torch.float32)


def _on(weight: Tensor | None, like: Tensor) -> Tensor | None:
    return None if weight is None else weight.to(like.device)


def check_loss_weights(cfg: Any, labels: list[str]) -> None:
    """A ConfigError naming the key for a {label: weight} mapping (train.class_weight,
    multi_label.pos_weight) with a name that is not one of the data's labels; called before
    anything is written."""
    keys = [("train.class_weight", cfg.train.class_weight)]
    if getattr(cfg, "multi_label", None) is not None:
        keys.append(("multi_label.pos_weight", cfg.multi_label.pos_weight))
    for key, spec in keys:
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(labels))
            if unknown:
                shown = labels if len(labels) <= 30 else [*labels[:30], f"... ({len(labels)} in all)"]
                raise ConfigError(f"{key}: unknown label(s) {unknown}; the data's labels are {shown}")


def mapped_weights(spec: dict[str, float], labels: list[str]) -> Tensor:
    """[C] weights of a {label: weight} mapping over `labels`, 1 for a label it does not name."""
    return torch.tensor([float(spec.get(name, 1.0)) for name in labels], dtype=torch.float32)


def _weights(spec: Any, labels: list[str] | None, train_targets: Any, balanced: Any) -> Tensor | None:
    """The [C] weights of a LabelWeights value: None for `none`, for `balanced` without training
    targets, or for a mapping without label names (evaluation and prediction need none)."""
    if isinstance(spec, dict):
        return None if labels is None else mapped_weights(spec, labels)
    if spec == "balanced" and train_targets is not None:
        return balanced(train_targets)
    return None


DISTILLABLE = tuple(task for task, head in HEAD_TYPES.items() if head.distillable)


def head_for(
    cfg: Any, train_targets: Any = None, thresholds: np.ndarray | None = None, labels: list[str] | None = None,
    temperature: float = 1.0,
) -> Head:
    """The head of a ClassifierConfig (`data.task` and its `multi_label` / `regression` sections).
    `train_targets` give the `balanced` weights, `labels` the order of a {label: weight} mapping
    (train.class_weight, multi_label.pos_weight; unknown names: `check_loss_weights`);
    `thresholds` restore a run's tuned ones, `temperature` its calibration (tfm_cls.classify.calibration;
    a fresh head starts at 1.0)."""
    head = _head_of(cfg, train_targets, thresholds, labels)
    head.temperature = float(temperature)
    return head


def _head_of(cfg: Any, train_targets: Any, thresholds: np.ndarray | None, labels: list[str] | None) -> Head:
    task = cfg.data.task
    if task == MULTI_LABEL:
        ml = cfg.multi_label
        pos_weight = _weights(ml.pos_weight, labels, train_targets,
                              lambda t: positive_weights(np.asarray(t, dtype=np.float64)))
        return MultiLabelHead(thresholds_mode=ml.thresholds, fixed_threshold=ml.threshold, min_positives=ml.min_positives,
                              ensure_label=ml.ensure_label, pos_weight=pos_weight, prior_init=ml.prior_init,
                              thresholds=None if thresholds is None else np.asarray(thresholds, dtype=np.float64))
    if task == REGRESSION:
        return RegressionHead(loss_name=cfg.regression.loss, huber_delta=cfg.regression.huber_delta)
    class_weight = None
    if labels is not None:
        class_weight = _weights(cfg.train.class_weight, labels, train_targets,
                                lambda t: balanced_class_weights(np.asarray(t), len(labels)))
    return Head(label_smoothing=cfg.train.label_smoothing, class_weight=class_weight)

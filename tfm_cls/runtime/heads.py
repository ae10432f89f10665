"""What each task type's outputs mean at inference, without torch: scores, decisions, output rows.

    single_label   softmax probabilities; the most probable label
    multi_label    one sigmoid per label; every label whose probability reaches its threshold
                   (a row with none gets its most probable label unless `ensure_label` is off)
    regression     one value

The training heads (tfm_cls.classify.heads) subclass these and add their losses and metrics, so a decision
rule and an output row are written once for `tfm-cls predict`, `eval`, `infer` and the exporter.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

SINGLE_LABEL, MULTI_LABEL, REGRESSION = "single_label", "multi_label", "regression"


def softmax(x: np.ndarray) -> np.ndarray:
    """Probabilities over the last axis (shifted by the row maximum, so large logits cannot overflow)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0)))


def _probabilities(labels: list[str], scores: np.ndarray) -> dict[str, float]:
    return {label: round(float(p), 6) for label, p in zip(labels, scores)}


def _label_index(value: Any, labels: list[str]) -> int:
    """A label name, or an index into `labels` (an int, or a string or float holding one)."""
    if isinstance(value, str) and value in labels:
        return labels.index(value)
    try:
        i = int(value)
    except (TypeError, ValueError):
        i = -1
    if not 0 <= i < len(labels) or isinstance(value, float) and not value.is_integer():
        raise ValueError(f"label {value!r} is neither an index in [0, {len(labels)}) nor one of {labels}")
    return i


@dataclasses.dataclass
class SingleLabel:
    """One label per text: the softmax's most probable. The base of the other task types."""

    task: ClassVar[str] = SINGLE_LABEL
    onnx_task: ClassVar[str] = "text-classification"
    """The export spec's task (export/spec.py), "-pair" appended for sentence pairs."""
    score_output: ClassVar[str] = "probabilities"
    """The graph output that holds the scores users see."""
    chunkable: ClassVar[bool] = True
    """Long texts may be classified as windows whose scores are aggregated."""
    decision_fields: ClassVar[tuple[str, ...]] = ()
    """The ExportMetadata fields that hold this head's decision rule (written for this head only)."""
    temperature: float = 1.0
    """Calibration (tfm_cls.classify.calibration): the scores are those of logits / temperature; 1.0 = the
    raw softmax (a run or export that records none). Order-preserving: the argmax never changes."""

    def scaled(self, logits: np.ndarray) -> np.ndarray:
        """logits / temperature ([N, C]); the logits themselves (bit for bit) at 1.0."""
        return logits if self.temperature == 1.0 else logits / np.asarray(self.temperature, dtype=logits.dtype)

    def num_outputs(self, num_labels: int) -> int:
        """The width of the logits for `num_labels` label names."""
        return num_labels

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """What users see of logits [N, outputs]: probabilities [N, C] of logits / temperature
        (regression: values [N])."""
        return softmax(self.scaled(logits))

    def decide(self, scores: np.ndarray) -> np.ndarray | None:
        """Per-label decisions [N, C] (bool) where the task has them; None (argmax) here."""
        return None

    def predicted(self, scores: np.ndarray) -> np.ndarray:
        """The prediction metrics compare with the targets: class ids [N]."""
        return scores.argmax(-1)

    def fields(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> dict[str, Any]:
        """The prediction fields of one output row (None scores: an empty input, no guess)."""
        if scores is None:
            return {"label": None, "score": None, "probabilities": None}
        best = int(scores.argmax())
        return {"label": labels[best], "score": round(float(scores[best]), 6),
                "probabilities": _probabilities(labels, scores)}

    def label_scores(self, scores: np.ndarray, chosen: np.ndarray | None, labels: list[str]) -> list[dict[str, Any]]:
        """Every label as {"label", "score"}, highest score first (the service's /predict answer,
        TEI's shape); with per-label decisions, each says whether it was "selected"."""
        order = np.argsort(-scores, kind="stable")
        entries = [{"label": labels[j], "score": float(scores[j])} for j in order]
        if chosen is not None:
            for entry, j in zip(entries, order):
                entry["selected"] = bool(chosen[j])
        return entries

    def csv_columns(self, labels: list[str]) -> list[str]:
        return ["label", "score", *(f"prob_{label}" for label in labels)]

    def csv_cells(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> list[str]:
        if scores is None:
            return ["", "", *([""] * len(labels))]
        best = int(scores.argmax())
        return [labels[best], f"{scores[best]:.6f}", *(f"{p:.6f}" for p in scores)]

    def target(self, value: Any, labels: list[str]) -> Any:
        """A labelled file's target of one row: a label name or index -> its index (ValueError
        saying what was expected otherwise)."""
        return _label_index(value, labels)

    def gate(self, scores: np.ndarray, targets: np.ndarray) -> tuple[str, float, np.ndarray]:
        """(name, value, predictions) of the metric the int8 gate compares: accuracy here."""
        pred = scores.argmax(axis=1)
        return "accuracy", float((pred == targets).mean()), pred

    def agreement(self, a: np.ndarray, b: np.ndarray) -> float:
        """The share of rows on which two models' predictions agree."""
        return float((a == b).all(axis=1).mean()) if a.ndim == 2 else float((a == b).mean())

    def metadata(self, pair: bool) -> dict[str, Any]:
        """ExportMetadata fields of this head (tfm_cls.runtime.metadata). A single-label model of
        single texts writes none: such files carry exactly what they did before task types. A
        calibrated head adds its temperature (an export without it reads as 1.0)."""
        fields: dict[str, Any] = {"head": self.task, "text_pair": pair} if pair or self.task != SINGLE_LABEL else {}
        if self.temperature != 1.0:
            fields["temperature"] = float(self.temperature)
        return fields


@dataclasses.dataclass
class MultiLabel(SingleLabel):
    """Any number of labels per text: each label whose sigmoid reaches its threshold."""

    task: ClassVar[str] = MULTI_LABEL
    onnx_task: ClassVar[str] = "multi-label-classification"
    chunkable: ClassVar[bool] = False
    decision_fields: ClassVar[tuple[str, ...]] = ("ensure_label", "thresholds", "fixed_threshold")
    fixed_threshold: float = 0.5
    ensure_label: bool = True
    thresholds: np.ndarray | None = None
    """[C] decision thresholds; None until tuned (then `fixed_threshold` everywhere)."""

    def scores(self, logits: np.ndarray) -> np.ndarray:
        return sigmoid(self.scaled(logits))

    def current_thresholds(self, num_labels: int) -> np.ndarray:
        return self.thresholds if self.thresholds is not None else np.full(num_labels, self.fixed_threshold)

    def decide(self, scores: np.ndarray) -> np.ndarray:
        """[N, C] bool: probability >= the label's threshold; with `ensure_label` a row with no
        label over its threshold gets its most probable label."""
        chosen = scores >= np.asarray(self.current_thresholds(scores.shape[1]))[None, :]
        if self.ensure_label and len(chosen):
            empty = ~chosen.any(axis=1)
            chosen[empty, scores[empty].argmax(axis=1)] = True
        return chosen

    def predicted(self, scores: np.ndarray) -> np.ndarray:
        """Multi-hot int predictions [N, C]."""
        return self.decide(scores).astype(np.int64)

    def target(self, value: Any, labels: list[str]) -> np.ndarray:
        """A list of label names or indices (or one) -> multi-hot [C]."""
        hot = np.zeros(len(labels), dtype=np.int64)
        for item in value if isinstance(value, list) else [value]:
            hot[_label_index(item, labels)] = 1
        return hot

    def gate(self, scores: np.ndarray, targets: np.ndarray) -> tuple[str, float, np.ndarray]:
        """micro-F1 with the file's thresholds."""
        pred = self.predicted(scores)
        tp = float((pred & targets).sum())
        return "micro_f1", 2 * tp / max(float(pred.sum() + targets.sum()), 1e-9), pred

    def fields(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> dict[str, Any]:
        if scores is None:
            return {"labels": None, "scores": None, "probabilities": None}
        picked = [j for j in np.argsort(-scores, kind="stable") if chosen[j]]
        return {"labels": [labels[j] for j in picked], "scores": [round(float(scores[j]), 6) for j in picked],
                "probabilities": _probabilities(labels, scores)}

    def csv_columns(self, labels: list[str]) -> list[str]:
        return ["labels", *(f"prob_{label}" for label in labels)]

    def csv_cells(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> list[str]:
        if scores is None:
            return ["", *([""] * len(labels))]
        picked = [j for j in np.argsort(-scores, kind="stable") if chosen[j]]
        return ["|".join(labels[j] for j in picked), *(f"{p:.6f}" for p in scores)]

    def metadata(self, pair: bool) -> dict[str, Any]:
        thresholds = None if self.thresholds is None else [float(t) for t in self.thresholds]
        return {**super().metadata(pair), "ensure_label": self.ensure_label, "thresholds": thresholds,
                "fixed_threshold": self.fixed_threshold}


@dataclasses.dataclass
class Regression(SingleLabel):
    """One value per text (the output itself)."""

    task: ClassVar[str] = REGRESSION
    onnx_task: ClassVar[str] = "text-regression"
    score_output: ClassVar[str] = "value"
    chunkable: ClassVar[bool] = False

    def num_outputs(self, num_labels: int) -> int:
        return 1

    def scores(self, logits: np.ndarray) -> np.ndarray:
        return logits[:, 0]

    def predicted(self, scores: np.ndarray) -> np.ndarray:
        return scores

    def target(self, value: Any, labels: list[str]) -> float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"regression target {value!r} is not a number") from None

    def gate(self, scores: np.ndarray, targets: np.ndarray) -> tuple[str, float, np.ndarray]:
        """Pearson's r of the values."""
        pearson = float(np.corrcoef(scores, targets)[0, 1]) if np.ptp(scores) > 0 and np.ptp(targets) > 0 else 0.0
        return "pearson", pearson, scores

    def agreement(self, a: np.ndarray, b: np.ndarray) -> float:
        """Values within 1 % of the range of the first are "the same"."""
        return float((np.abs(a - b) <= 0.01 * max(float(np.ptp(a)), 1e-9)).mean())

    def fields(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> dict[str, Any]:
        return {"value": None if scores is None else round(float(scores), 6)}

    def label_scores(self, scores: np.ndarray, chosen: np.ndarray | None, labels: list[str]) -> list[dict[str, Any]]:
        """The value as the score of the one label (the label column's name)."""
        return [{"label": labels[0] if labels else "value", "score": float(scores)}]

    def csv_columns(self, labels: list[str]) -> list[str]:
        return ["value"]

    def csv_cells(self, scores: np.ndarray | None, chosen: np.ndarray | None, labels: list[str]) -> list[str]:
        return ["" if scores is None else f"{float(scores):.6f}"]


RUNTIME_HEADS: dict[str, type[SingleLabel]] = {h.task: h for h in (SingleLabel, MultiLabel, Regression)}
TASK_TYPES = tuple(RUNTIME_HEADS)
ONNX_TASKS = {h.onnx_task: h.task for h in RUNTIME_HEADS.values()}
"""export spec task -> task type."""


def runtime_head(meta: Any) -> SingleLabel:
    """The head of an export's ExportMetadata (its spec task names the type; a multi-label file
    carries its thresholds)."""
    cls = RUNTIME_HEADS[ONNX_TASKS[meta.spec_task]]
    if cls is MultiLabel:
        thresholds = None if meta.thresholds is None else np.asarray(meta.thresholds, dtype=np.float64)
        return MultiLabel(fixed_threshold=float(meta.fixed_threshold), ensure_label=bool(meta.ensure_label),
                          thresholds=thresholds, temperature=meta.temperature_or_one)
    return cls(temperature=meta.temperature_or_one)

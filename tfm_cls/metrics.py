"""Classification metrics (scikit-learn): accuracy, macro-F1, per-class scores, report, confusion."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import (
    accuracy_score,
    classification_report,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
)

HIGHER_IS_BETTER = {"accuracy": True, "macro_f1": True, "loss": False}


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict[str, Any]:
    """accuracy, macro_f1 and {class: precision, recall, f1, support} over all `labels` (classes
    absent from y_true count with zero support, and sklearn's zero_division=0)."""
    ids = list(range(len(labels)))
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=ids, zero_division=0
    )
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, labels=ids, average="macro", zero_division=0)),
        "per_class": {
            name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for name, p, r, f, s in zip(labels, precision, recall, f1, support)
        },
    }


def report_text(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> str:
    return classification_report(
        y_true, y_pred, labels=list(range(len(labels))), target_names=labels, digits=4, zero_division=0
    )


def confusion(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """[num_classes, num_classes] counts; row = true class, column = predicted class."""
    return confusion_matrix(y_true, y_pred, labels=list(range(num_classes)))


def is_better(metric: str, value: float, best: float | None) -> bool:
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best

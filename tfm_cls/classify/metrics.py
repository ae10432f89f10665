"""Metrics of every task type: classification (scikit-learn: accuracy, macro-F1, per-class
scores, report, confusion), multi-label (scikit-learn: micro/macro-F1, subset accuracy, per-label
scores) and regression (scipy: Pearson, Spearman; MSE)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tfm_cls.training.best import HIGHER_IS_BETTER, is_better  # noqa: F401 (re-exported: the metrics' order)


def _sk() -> Any:
    """sklearn.metrics, imported on first use: importing it costs a command's start as much as torch
    does, and `tfm-cls predict` / `eval` reach this module through the heads without scoring."""
    import sklearn.metrics

    return sklearn.metrics


def classification_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict[str, Any]:
    """accuracy, macro_f1 and {class: precision, recall, f1, support} over all `labels` (classes
    absent from y_true count with zero support, and sklearn's zero_division=0)."""
    ids = list(range(len(labels)))
    precision, recall, f1, support = _sk().precision_recall_fscore_support(
        y_true, y_pred, labels=ids, zero_division=0
    )
    return {
        "accuracy": float(_sk().accuracy_score(y_true, y_pred)),
        "macro_f1": float(_sk().f1_score(y_true, y_pred, labels=ids, average="macro", zero_division=0)),
        "per_class": {
            name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for name, p, r, f, s in zip(labels, precision, recall, f1, support)
        },
    }


def multi_label_metrics(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> dict[str, Any]:
    """Multi-hot y_true, y_pred [N, C] -> micro_f1, macro_f1, subset_accuracy (every label of a
    row right) and {label: precision, recall, f1, support} (sklearn, zero_division=0)."""
    y_true, y_pred = np.asarray(y_true).astype(np.int64), np.asarray(y_pred).astype(np.int64)
    precision, recall, f1, support = _sk().precision_recall_fscore_support(y_true, y_pred, average=None, zero_division=0)
    return {
        "micro_f1": float(_sk().f1_score(y_true, y_pred, average="micro", zero_division=0)),
        "macro_f1": float(_sk().f1_score(y_true, y_pred, average="macro", zero_division=0)),
        "subset_accuracy": float(_sk().accuracy_score(y_true, y_pred)),
        "per_label": {
            name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for name, p, r, f, s in zip(labels, precision, recall, f1, support)
        },
    }


def _correlation(kind: str, a: np.ndarray, b: np.ndarray) -> float:
    """Pearson / Spearman r; 0.0 where it is undefined (fewer than 2 rows, or a constant side:
    an untrained model predicting one value has no linear relation to the gold scores, and a NaN
    would never compare better or worse in best-checkpoint selection)."""
    from scipy import stats

    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    r = stats.pearsonr(a, b)[0] if kind == "pearson" else stats.spearmanr(a, b)[0]
    return float(r) if np.isfinite(r) else 0.0


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Gold and predicted values [N] -> pearson, spearman (scipy), mse, mae."""
    y_true, y_pred = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    err = y_pred - y_true
    return {
        "pearson": _correlation("pearson", y_pred, y_true),
        "spearman": _correlation("spearman", y_pred, y_true),
        "mse": float(np.mean(err**2)) if len(err) else 0.0,
        "mae": float(np.mean(np.abs(err))) if len(err) else 0.0,
    }


def multi_label_report(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> str:
    """sklearn's report over multi-hot arrays (micro, macro, weighted and samples averages)."""
    return _sk().classification_report(
        np.asarray(y_true).astype(np.int64), np.asarray(y_pred).astype(np.int64), target_names=labels,
        digits=4, zero_division=0,
    )


def regression_report(y_true: np.ndarray, y_pred: np.ndarray) -> str:
    m = regression_metrics(y_true, y_pred)
    return "".join(f"{k:>9} {v:.4f}\n" for k, v in m.items()) + f"{'examples':>9} {len(y_true)}\n"


def report_text(y_true: np.ndarray, y_pred: np.ndarray, labels: list[str]) -> str:
    return _sk().classification_report(
        y_true, y_pred, labels=list(range(len(labels))), target_names=labels, digits=4, zero_division=0
    )


def confusion(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """[num_classes, num_classes] counts; row = true class, column = predicted class."""
    return _sk().confusion_matrix(y_true, y_pred, labels=list(range(num_classes)))

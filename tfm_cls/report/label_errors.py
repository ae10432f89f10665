"""Likely label errors in the training data: confident learning (Northcutt et al. 2021).

    likely_label_errors(probs, labels)    single-label: the ranking of confident learning
    label_set_errors(probs, targets)      multi-label: the label most confidently contradicted
    value_errors(predicted, targets)      regression: the largest standardised residuals

Single-label, the published method written out (the `cleanlab` package implements the same): the
per-class threshold t_j is the mean probability of class j over the examples labelled j; an
example is "confidently" of class j when its probability of j reaches t_j (the most probable such
class when several do); the confident joint counts given label x confident class. Examples whose
confident class is not their given label are the issues, ranked by self-confidence (the
probability of the given label, lowest first: "prune by self-confidence"); every other example
follows, also by self-confidence, so the whole training split is ranked.

The probabilities are the trained model's own on its training texts (in-sample): training the
Transformer k more times for out-of-fold probabilities is not affordable in a report, and a model
that memorised a wrong label hides it, so the ranking misses some errors rather than inventing any.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def likely_label_errors(probs: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """probs [N, C], given labels [N] -> {"ranking": indices [N], most likely error first;
    "issues": the number of confident-learning issues (the first of the ranking);
    "confident": each example's confident class [N] (-1: none reaches its threshold)}."""
    probs, labels = np.asarray(probs, dtype=np.float64), np.asarray(labels, dtype=np.int64)
    n, c = probs.shape
    thresholds = np.array([probs[labels == j, j].mean() if (labels == j).any() else 1.0 for j in range(c)])  # [C]
    above = probs >= thresholds[None, :]  # [N, C]
    masked = np.where(above, probs, -1.0)
    confident = np.where(above.any(axis=1), masked.argmax(axis=1), -1)  # [N]
    self_confidence = probs[np.arange(n), labels]  # [N]
    issue = (confident >= 0) & (confident != labels)
    # Issues first, each group by self-confidence (lowest first); ties by index (stable).
    ranking = np.lexsort((np.arange(n), self_confidence, ~issue))
    return {"ranking": ranking, "issues": int(issue.sum()), "confident": confident,
            "self_confidence": self_confidence, "thresholds": thresholds}


def label_set_errors(probs: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """Multi-label: probs and multi-hot targets [N, C]; each example's worst label is the one its
    probability most contradicts (|given - p|, largest); the ranking is by that gap."""
    probs, targets = np.asarray(probs, dtype=np.float64), np.asarray(targets, dtype=np.float64)
    gap = np.abs(targets - probs)  # [N, C]
    worst = gap.argmax(axis=1)  # [N]
    score = gap[np.arange(len(gap)), worst]
    ranking = np.lexsort((np.arange(len(score)), -score))
    return {"ranking": ranking, "issues": int((score > 0.5).sum()), "worst_label": worst, "gap": score}


def value_errors(predicted: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """Regression: residuals over their standard deviation; the ranking is by |z|, largest first."""
    residual = np.asarray(predicted, dtype=np.float64) - np.asarray(targets, dtype=np.float64)
    z = residual / max(float(residual.std()), 1e-12)
    ranking = np.lexsort((np.arange(len(z)), -np.abs(z)))
    return {"ranking": ranking, "issues": int((np.abs(z) > 3).sum()), "z": z}

"""PNG figures for a run: the test confusion matrix, the training curves, the MLM pretraining
curves (matplotlib's object API, no display needed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import ConfusionMatrixDisplay

from tfm_cls.io import atomic_path

# Figures are built with the object API (Figure, not pyplot): no global backend, no display needed.


def _save(fig: Figure, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")


def plot_confusion_matrix(matrix: np.ndarray, labels: list[str], path: str | Path, title: str = "test") -> None:
    size = max(4.0, 0.55 * len(labels) + 2.5)
    fig = Figure(figsize=(size, size))
    ax = fig.subplots()
    ConfusionMatrixDisplay(matrix, display_labels=labels).plot(
        ax=ax, cmap="Blues", colorbar=False, xticks_rotation=45, values_format="d"
    )
    ax.set_title(f"confusion matrix ({title})")
    _save(fig, path)


def plot_training_curves(history: dict[str, list[dict[str, Any]]], path: str | Path, best_metric: str) -> None:
    """history: {"train": [{step, loss, lr}], "eval": [{step, loss, accuracy, macro_f1}]}."""
    train, evals = history.get("train", []), history.get("eval", [])
    fig = Figure(figsize=(14, 4))
    ax_loss, ax_score, ax_lr = fig.subplots(1, 3)
    if train:
        ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label="train", alpha=0.8)
        ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    if evals:
        steps = [r["step"] for r in evals]
        ax_loss.plot(steps, [r["loss"] for r in evals], "o-", label="validation")
        ax_score.plot(steps, [r["accuracy"] for r in evals], "o-", label="accuracy")
        ax_score.plot(steps, [r["macro_f1"] for r in evals], "s-", label="macro-F1")
    ax_loss.set(title="loss", xlabel="step")
    ax_score.set(title=f"validation (best by {best_metric})", xlabel="step")
    ax_lr.set(title="learning rate", xlabel="step")
    for ax in (ax_loss, ax_score):
        if ax.lines:
            ax.legend()
    _save(fig, path)


def plot_pretraining_curves(history: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """Loss, perplexity (exp of the loss) and learning rate against the optimizer step."""
    train, evals = history.get("train", []), history.get("eval", [])
    fig = Figure(figsize=(14, 4))
    ax_loss, ax_ppl, ax_lr = fig.subplots(1, 3)
    for rows, style, label in ((train, "-", "train"), (evals, "o-", "validation")):
        if rows:
            steps = [r["step"] for r in rows]
            ax_loss.plot(steps, [r["loss"] for r in rows], style, label=label, alpha=0.85)
            ax_ppl.plot(steps, [math.exp(min(r["loss"], 50.0)) for r in rows], style, label=label, alpha=0.85)
    if train:
        ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax_loss.set(title="MLM loss (masked tokens)", xlabel="step")
    ax_ppl.set(title="MLM perplexity", xlabel="step", yscale="log")
    ax_lr.set(title="learning rate", xlabel="step")
    for ax in (ax_loss, ax_ppl):
        if ax.lines:
            ax.legend()
    _save(fig, path)

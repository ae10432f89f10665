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


SCORE_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "micro_f1": "micro-F1",
               "subset_accuracy": "subset accuracy", "pearson": "Pearson", "spearman": "Spearman", "mse": "MSE"}


def plot_per_label_f1(per_label: dict[str, dict[str, float]], path: str | Path, title: str = "test") -> None:
    """Horizontal bars of each label's F1, sorted (best on top), with its support."""
    items = sorted(per_label.items(), key=lambda kv: kv[1]["f1"])
    fig = Figure(figsize=(7, max(3.0, 0.28 * len(items) + 1.2)))
    ax = fig.subplots()
    ax.barh(range(len(items)), [v["f1"] for _, v in items], color="tab:blue")
    ax.set_yticks(range(len(items)), [f"{name} ({v['support']})" for name, v in items])
    ax.set(xlim=(0, 1), xlabel="F1", title=f"per-label F1 ({title}; support in brackets)")
    _save(fig, path)


def plot_regression_scatter(gold: np.ndarray, predicted: np.ndarray, path: str | Path, name: str = "value",
                            title: str = "test") -> None:
    """Predicted against gold values, with the identity line."""
    fig = Figure(figsize=(5, 5))
    ax = fig.subplots()
    ax.scatter(gold, predicted, s=6, alpha=0.4)
    if len(gold):
        low, high = float(min(np.min(gold), np.min(predicted))), float(max(np.max(gold), np.max(predicted)))
        ax.plot([low, high], [low, high], "k--", lw=1, label="predicted = gold")
        ax.legend()
    ax.set(xlabel=f"gold {name}", ylabel=f"predicted {name}", title=f"predicted vs gold ({title})")
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
        # Every score the evaluations hold (single-label: accuracy, macro-F1; other tasks: theirs).
        for key, style in zip([k for k in SCORE_NAMES if k in evals[0]], ("o-", "s-", "^-", "d-")):
            ax_score.plot(steps, [r[key] for r in evals], style, label=SCORE_NAMES[key])
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

"""The current model whose guesses go with each suggestion and whose uncertainty picks them.

Three, by what there is:
- a trained run (`--run`): its calibrated scores (the head's own: softmax of logits / T, or one
  sigmoid per label with its tuned threshold);
- labelled texts and no run (`--data DIR`): logistic regression on the frozen sentence vectors
  (SetFit's head without its fine-tuning: seconds), the label descriptions added as one more
  example each where they help (docs/suggest.md);
- label names only: zero-shot, the cosines to the names' (or descriptions') vectors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from tfm_cls.suggest.names import zero_shot_proba

LR_C = 10.0
"""The logistic regression's C: SetFit's C=1 on unit vectors underfits a few dozen labels (sst2 at 8 a
class: 50 % on 2 of 3 samples against 52-54 % at C=10; ag_news 43-57 % against 52-67 %)."""


@dataclasses.dataclass
class Guesses:
    """Calibrated scores [N, C] over `labels`; `thresholds` [C] for multi-label (None: single-label)."""

    proba: np.ndarray
    labels: list[str]
    thresholds: np.ndarray | None = None
    source: str = ""

    def row(self, i: int) -> dict[str, Any]:
        """The guess of text i as an output row shows it: the label (and its score), or the labels
        at or above their thresholds (and every label's score)."""
        p = self.proba[i]
        if self.thresholds is None:
            top = int(p.argmax())
            return {"label": self.labels[top], "score": round(float(p[top]), 4)}
        return {"labels": [n for n, q, t in zip(self.labels, p, self.thresholds) if q >= t],
                "scores": {n: round(float(q), 4) for n, q in zip(self.labels, p)}}


def zero_shot(vectors: np.ndarray, prototypes: np.ndarray, labels: list[str]) -> Guesses:
    return Guesses(zero_shot_proba(vectors, prototypes), labels, source="zero-shot from the label names")


def fit_vectors(labelled: np.ndarray, targets: np.ndarray, labels: list[str], prototypes: np.ndarray | None = None,
                c: float = LR_C) -> Callable[[np.ndarray], Guesses]:
    """Logistic regression on labelled unit vectors [M, D] with class ids [M] (or multi-hot [M, C]:
    one per label, threshold 0.5); `prototypes` [C, D]: the labels' own vectors added as one
    example each. Classes never labelled get the lowest score. Returns vectors -> Guesses."""
    from sklearn.linear_model import LogisticRegression

    x, y = labelled, np.asarray(targets)
    multi = y.ndim == 2
    if prototypes is not None:
        x = np.concatenate([x, prototypes])
        y = np.concatenate([y, np.eye(len(labels), dtype=y.dtype) if multi else np.arange(len(labels))])
    source = f"logistic regression on {len(labelled)} labelled texts' vectors" + (" + the label names" if prototypes is not None else "")
    if multi:
        models = [None if len(set(y[:, j])) < 2 else LogisticRegression(C=c, max_iter=1000).fit(x, y[:, j])
                  for j in range(len(labels))]

        def guess_multi(v: np.ndarray) -> Guesses:
            cols = [np.full(len(v), float(y[0, j])) if m is None else m.predict_proba(v)[:, 1]
                    for j, m in enumerate(models)]
            return Guesses(np.stack(cols, axis=1), labels, np.full(len(labels), 0.5), source)

        return guess_multi
    present = np.unique(y)
    if len(present) < 2:  # one class labelled so far: it is every guess, every text equally unsure
        def guess_one(v: np.ndarray) -> Guesses:
            p = np.full((len(v), len(labels)), 0.0)
            p[:, int(present[0])] = 1.0
            return Guesses(p, labels, source=source)

        return guess_one
    model = LogisticRegression(C=c, max_iter=1000).fit(x, y)

    def guess(v: np.ndarray) -> Guesses:
        p = np.zeros((len(v), len(labels)))
        p[:, model.classes_] = model.predict_proba(v)
        return Guesses(p, labels, source=source)

    return guess


def from_run(run: Any, where: str | None = None) -> tuple[Callable[[list[str]], Guesses], list[str]]:
    """A trained run's calibrated scores of texts (PyTorch), and its labels. `run`: a run directory
    or a loaded run (runs.LoadedRun)."""
    from tfm_cls.classify.predict import predict_proba, run_head
    from tfm_cls.errors import DataError
    from tfm_cls.runs import load_run

    where = where or str(run if isinstance(run, (str, bytes)) or not hasattr(run, "run_dir") else run.run_dir)
    run = load_run(run) if not hasattr(run, "model") else run
    head = run_head(run)
    probe = head.scores(np.zeros((1, int(run.model.config["num_classes"])), np.float32))
    if probe.ndim != 2:
        raise DataError(f"{where}: a regression run has no labels to suggest texts for; suggest works for "
                        "classification runs (or give --data DIR without --run)")
    chosen = head.decide(probe)
    thresholds = None
    if chosen is not None and np.ndim(chosen) == 2:  # one decision per label: multi-label
        thresholds = np.asarray(head.current_thresholds(len(run.labels)), np.float64)

    def guess(texts: list[str]) -> Guesses:
        return Guesses(predict_proba(run, texts), run.labels, thresholds, f"the run {where}")

    guess.train_examples = run_train_examples(run.run_dir)  # type: ignore[attr-defined]
    return guess, list(run.labels)


def run_train_examples(run_dir: Any) -> int | None:
    """How many labelled texts the run was trained on (metrics.json `data.train_examples`; None
    where the run does not say): the `auto` strategy's count where no labelled folder is given."""
    import json
    from pathlib import Path

    try:
        n = json.loads((Path(run_dir) / "metrics.json").read_text())["data"]["train_examples"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return int(n) if isinstance(n, int) else None

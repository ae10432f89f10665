"""Starting the bag-of-tokens branch (`model.wide`) before training: its IDF table and, with
`train.wide_warm_start`, its weights fitted as a linear model. docs/tasks.md, "Many rare labels".

    start_wide(model, task_head, splits, warm_start=True)   # once, before the first step, never on resume

The warm start is linear probing before fine-tuning (Kumar et al. 2022, "LP-FT"), on the branch
that is linear: the training texts' bags of tokens (exactly `wide_token_weights`, a sparse
[N, vocab] matrix) and the head's own loss, full-batch L-BFGS with an L2 penalty whose strength
is picked on the validation loss. It is the TF-IDF + logistic regression baseline fitted in
seconds inside the network, so training starts where the classical baseline ends and the encoder
learns what words alone miss; without it, the branch learns the same words from one step of 32
texts at a time, which on long documents a CPU budget buys a few epochs of.
"""

from __future__ import annotations

import copy
import logging
import math
import time
import warnings
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tfm_cls.batching import TokenizedSplit, collate
from tfm_cls.metrics import is_better

logger = logging.getLogger(__name__)

WARM_START_C = (1.0, 10.0, 100.0, 1000.0)
"""Inverse L2 strengths tried, as scikit-learn's C: the sum of the per-output losses + ||W||^2 / (2C),
so they mean the same for any number of rows and labels. The one with the best validation score
(the run's `train.best_metric`) is kept; without a validation split, 10 (1 / C of the summed loss is
about the strength that suits an L2-normalised TF-IDF bag of a few thousand texts)."""
WARM_START_ITERATIONS = 200
"""At most this many L-BFGS iterations a fit (each a pass over the training bags, plus its line search)."""


def document_frequencies(split: TokenizedSplit, vocab_size: int) -> np.ndarray:
    """[vocab_size] in how many rows of the split each token occurs."""
    df = np.zeros(vocab_size, dtype=np.int64)
    for ids in split.input_ids:
        df[np.unique(np.asarray(ids, dtype=np.int64))] += 1
    return df


def set_idf(model: nn.Module, split: TokenizedSplit) -> None:
    """The `tfidf` weighting's table from the training rows: scikit-learn's smooth idf,
    ln((1 + N) / (1 + df)) + 1, and 0 for a token the rows never hold (and padding)."""
    df = document_frequencies(split, model.config["vocab_size"])
    n = split.num_rows
    idf = np.where(df > 0, np.log((1.0 + n) / (1.0 + df)) + 1.0, 0.0)
    pad = model.config.get("pad_token_id")
    if pad is not None:
        idf[pad] = 0.0
    with torch.no_grad():
        model.wide_idf.copy_(torch.from_numpy(idf).to(model.wide_idf.dtype))


@torch.no_grad()
def bag_matrix(model: nn.Module, split: TokenizedSplit, batch_size: int = 64) -> Tensor:
    """The split's rows as the branch sees them: a sparse CSR [rows, vocab] float32 matrix whose
    product with the branch's weights [vocab, C] is `wide_logits`."""
    rows, cols, values = [], [], []
    device, pad = model.wide.weight.device, model.config.get("pad_token_id") or 0
    for start in range(0, split.num_rows, batch_size):
        batch = collate(split, list(range(start, min(start + batch_size, split.num_rows))), pad)
        ids, mask = batch["input_ids"], batch["attention_mask"]  # [b, T]
        share = model.wide_token_weights(ids.to(device), mask.to(device)).float().cpu()  # [b, T]
        b, t = mask.nonzero(as_tuple=True)
        rows.append(b + start)
        cols.append(ids[b, t])
        values.append(share[b, t])
    shape = (split.num_rows, model.config["vocab_size"])
    bags = torch.sparse_coo_tensor(torch.stack([torch.cat(rows), torch.cat(cols)]), torch.cat(values), shape,
                                   check_invariants=True)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": a product and its gradient are all we use
        warnings.simplefilter("ignore", UserWarning)
        return bags.coalesce().to_sparse_csr()  # repeated tokens of a row summed


def _fit(bags: Tensor, targets: Tensor, head: Any, bias: Tensor, penalty: float) -> tuple[Tensor, Tensor]:
    """(weights [vocab, C], bias [C]) minimising head.loss(bags @ W + b) + penalty / 2 * ||W||^2
    (head.loss is a mean over the outputs: `penalty` = 1 / (C * outputs) is scikit-learn's C)."""
    weights = torch.zeros(bags.shape[1], bias.numel(), requires_grad=True)
    bias = bias.detach().clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS([weights, bias], lr=1.0, max_iter=WARM_START_ITERATIONS, history_size=10,
                                  tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        loss = head.loss(bags @ weights + bias, targets) + 0.5 * penalty * weights.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return weights.detach(), bias.detach()


def warm_start(model: nn.Module, head: Any, train: TokenizedSplit, validation: TokenizedSplit | None,
               best_metric: str = "loss", labels: list[str] | None = None) -> dict[str, float]:
    """Fit the branch's weights and the head's bias as a linear model of the bags (module
    docstring), C picked by `best_metric` on validation (the head's metrics, decision rule tuned
    there first, as the engine's evaluation does); returns what it chose (`C`, the validation
    score, `seconds`)."""
    started = time.monotonic()
    bags, targets = bag_matrix(model, train), torch.from_numpy(train.row_labels(list(range(train.num_rows))))
    bias = model.head.bias.detach().float().cpu()
    has_validation = validation is not None and validation.num_rows > 0
    grid = WARM_START_C if has_validation else (10.0,)
    if has_validation:
        val_bags = bag_matrix(model, validation)
        val_targets = validation.row_labels(list(range(validation.num_rows)))
        names = labels or [str(i) for i in range(bias.numel())]
        judge = copy.deepcopy(head)  # tune() sets thresholds: the task's head keeps its own
    best: tuple[float, float, Tensor, Tensor] | None = None
    for c in grid:
        weights, fitted_bias = _fit(bags, targets, head, bias, 1.0 / (c * targets.numel()))
        score = math.nan
        if has_validation:
            logits = (val_bags @ weights + fitted_bias).numpy()
            judge.tune(logits, val_targets)
            score = float(judge.metrics(logits, val_targets, names)[best_metric])
            logger.info("wide warm start: C %g -> validation %s %.4f", c, best_metric, score)
        if best is None or (has_validation and is_better(best_metric, score, best[0])):
            best = (score, c, weights, fitted_bias)
    score, c, weights, fitted_bias = best
    with torch.no_grad():
        model.wide.weight.copy_(weights.to(model.wide.weight))
        model.head.bias.copy_(fitted_bias.to(model.head.bias))
    seconds = time.monotonic() - started
    logger.info("wide warm start: the bag-of-tokens branch fitted (C %g, %d training rows) in %.1f s", c,
                train.num_rows, seconds)
    return {"C": c, "validation_score": score, "seconds": seconds}


def start_wide(model: nn.Module, head: Any, splits: dict[str, TokenizedSplit], warm: bool, best_metric: str = "loss",
               labels: list[str] | None = None) -> dict[str, float] | None:
    """Before the first step of a run (never on resume: the checkpoint has all of it): the IDF
    table of a `tfidf` branch, then the warm start if `warm`. Nothing for a model without a branch."""
    if getattr(model, "wide", None) is None:
        return None
    if model.wide_weighting == "tfidf":
        set_idf(model, splits["train"])
    if not warm:
        return None
    return warm_start(model, head, splits["train"], splits.get("validation"), best_metric, labels)

"""The solvers of a bag's linear model at one C (tfm_cls.bag.fit walks C): the head's own loss by
full-batch L-BFGS with an L2 penalty (`fit_head_loss`), or LinearSVC's squared hinge, one-vs-rest L2-SVMs
fitted by liblinear (`_fit_svm`), whose margins become log-odds by Platt scaling (multi-label: a scale and
a shift per label, `platt`) or the logits of one softmax (single-label: one scale and a shift per class,
`softmax_scaling`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn

from tfm_cls.bag.sparse import scipy_csr, torch_csr

logger = logging.getLogger(__name__)

LossFn = Callable[[Tensor, Tensor], Tensor]
"""(logits [N, C], targets) -> the mean loss over the values."""
WARM_START_ITERATIONS = 200
"""At most this many L-BFGS iterations a fit (each a pass over the training bags, plus its line search)."""


def platt(scores: Tensor, targets: Tensor, shift: bool = True) -> tuple[Tensor, Tensor]:
    """(scale [C], shift [C]) such that sigmoid(scale * scores + shift) fits each label's 0 / 1
    targets [N, C] (Platt 1999, with his smoothed targets (n+ + 1) / (n+ + 2) and 1 / (n- + 2), so
    a label whose scores separate it perfectly still gets a finite scale). `shift=False`: the
    shift stays 0 (the margins' own decision boundary kept)."""
    targets = targets.to(scores.dtype)
    positives, negatives = targets.sum(dim=0), (1.0 - targets).sum(dim=0)  # [C]
    soft = torch.where(targets > 0, (positives + 1.0) / (positives + 2.0), 1.0 / (negatives + 2.0))  # [N, C]
    return _scale_and_shift(scores, scores.shape[1],
                            lambda logits: nn.functional.binary_cross_entropy_with_logits(logits, soft), shift)


def softmax_scaling(scores: Tensor, targets: Tensor, shift: bool = True) -> tuple[Tensor, Tensor]:
    """(scale [C], the same value in every column; shift [C]) such that softmax(scale * scores + shift)
    fits the class ids [N]: one temperature and a shift per class, by cross-entropy. The single-label
    counterpart of `platt`: one-vs-rest margins become the logits of one softmax. `shift=False`: the
    temperature alone (the margins' own argmax kept)."""
    scale, fitted = _scale_and_shift(scores, 1, lambda logits: nn.functional.cross_entropy(logits, targets), shift)
    return scale.expand(scores.shape[1]).clone(), fitted


def _scale_and_shift(scores: Tensor, scales: int, loss: Callable[[Tensor], Tensor],
                     with_shift: bool = True) -> tuple[Tensor, Tensor]:
    """(scale [scales], shift [C]) minimising loss(scores [N, C] * scale + shift) by L-BFGS from (1, 0);
    without `with_shift` the shift stays 0."""
    scale, shift = torch.ones(scales, requires_grad=True), torch.zeros(scores.shape[1], requires_grad=with_shift)
    optimizer = torch.optim.LBFGS([scale, shift] if with_shift else [scale], lr=1.0, max_iter=100,
                                  line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        optimizer.zero_grad()
        value = loss(scores * scale + shift)
        value.backward()
        return value

    optimizer.step(closure)
    return scale.detach(), shift.detach()


def _fit_svm(bags: Tensor, targets: Tensor, c: float) -> tuple[Tensor, Tensor]:
    """(weights [rows, C], bias [C]) of one scikit-learn LinearSVC per label (squared hinge, L2, the
    intercept penalised as liblinear does) on the bags [N, rows] and 0 / 1 targets [N, C] (one-hot
    class ids: each class against the rest, LinearSVC's multi-class default): liblinear's
    dual coordinate descent fits 62 labels x 290k rows in seconds where L-BFGS over the same
    weights took minutes. A label all of one value gets zero weights and a margin of -1 or +1."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    x = scipy_csr(bags)
    y = targets.numpy() > 0.5  # [N, C]
    weights, bias = torch.zeros(bags.shape[1], y.shape[1]), torch.zeros(y.shape[1])
    for label in range(y.shape[1]):
        if y[:, label].all() or not y[:, label].any():
            bias[label] = 1.0 if y[:, label].all() else -1.0
            continue
        with warnings.catch_warnings():  # liblinear stopping at max_iter leaves a usable fit
            warnings.simplefilter("ignore", ConvergenceWarning)
            svc = LinearSVC(C=c, max_iter=2000).fit(x, y[:, label])
        weights[:, label] = torch.from_numpy(svc.coef_[0].astype(np.float32))
        bias[label] = float(svc.intercept_[0])
    return weights, bias


def fit_head_loss(bags: Tensor, targets: Tensor, loss: LossFn, bias: Tensor, c: float,
                  start: Tensor | None = None, deadline: float | None = None) -> tuple[Tensor, Tensor]:
    """A bag's linear model fitted with a head's own loss at one C: the public entry point for a caller that
    holds its bags already (the warm start's C grid and folds, tfm_cls.bag.fit; the few-label path's cross-validation,
    tfm_cls.bag.few_labels). `bags`: a torch sparse CSR [N, rows] (`bag_matrix`, `torch_csr`);
    `targets`: what `loss` takes (class ids [N], or 0 / 1 [N, C]); `loss`: the head's (`head.loss`);
    `bias` [C]: the start of the bias (zeros, or the head's prior).

    Returns (weights [rows, C], bias [C]) minimising loss(bags @ W + b, targets) + ||W||^2 / (2 c n), n
    the number of target values: the loss is their mean, so `c` is scikit-learn's C of the summed
    loss. L-BFGS from `start` weights (default zeros) and `bias`; the previous C of the grid is a
    nearby start that takes a fraction of the iterations. The gradient of the weights is formed by
    hand, bags^T @ dloss/dlogits with bags^T kept as CSR: autograd's backward of a sparse product
    costs ~15x more here. With a `deadline` (a time.monotonic() value) L-BFGS runs DEADLINE_CHUNK
    iterations at a time (its history carries over) and stops after the chunk that passes it."""
    penalty = 1.0 / (c * targets.numel())
    bags_t = torch_csr(scipy_csr(bags).T.tocsr())  # [rows, N]
    weights = torch.zeros(bags.shape[1], bias.numel()) if start is None else start.clone()  # [rows, C]
    bias = bias.detach().clone()  # [C]
    chunk = WARM_START_ITERATIONS if deadline is None else DEADLINE_CHUNK
    optimizer = torch.optim.LBFGS([weights, bias], lr=1.0, max_iter=chunk, history_size=10,
                                  tolerance_grad=1e-6, tolerance_change=1e-9, line_search_fn="strong_wolfe")

    def closure() -> Tensor:
        logits = (bags @ weights + bias).requires_grad_(True)  # [N, C]
        value = loss(logits, targets)
        value.backward()
        weights.grad = bags_t @ logits.grad + penalty * weights  # [rows, C]
        bias.grad = logits.grad.sum(dim=0)  # [C]
        return value.detach() + 0.5 * penalty * weights.pow(2).sum()

    done, max_eval = 0, optimizer.defaults["max_eval"]  # a step() also ends after max_eval loss evaluations
    while done < WARM_START_ITERATIONS:
        evals = optimizer.state[weights].get("func_evals", 0)
        optimizer.step(closure)
        iterations = optimizer.state[weights].get("n_iter", 0)  # over every step() so far
        converged = iterations - done < chunk and optimizer.state[weights]["func_evals"] - evals < max_eval
        done = iterations
        if converged or deadline is None:  # stopped for a reason of its own, or one call of it all
            break
        if deadline is not None and time.monotonic() >= deadline and done < WARM_START_ITERATIONS:
            logger.warning("wall-clock budget: the warm start's fit at C %g stopped after %d of at most %d "
                           "L-BFGS iterations", c, done, WARM_START_ITERATIONS)
            break
    return weights, bias


DEADLINE_CHUNK = 10
"""Under a wall-clock budget a fit checks the clock every this many L-BFGS iterations."""

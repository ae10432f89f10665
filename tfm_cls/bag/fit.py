"""Fitting the wide branch (`wide:`, tfm_cls.model.wide.WideBranch) before training, and how it
trains: the training side of the component. docs/tasks.md, "Many rare labels".

    offsets = start_wide(cfg, model, splits, labels, run_dir, resume=resume, env=env)   # tfm_cls.train
    task = ClassificationTask(..., offsets=offsets)   # which calls train_branch(model, cfg.wide)

On a fresh run: the IDF table of a `tfidf` branch and, with `wide.warm_start`, its weights fitted
as a linear model; the warm start's training offsets are written to RUN/wide_offsets.safetensors
(OFFSETS_FILE), and a resumed run reads them back (its checkpoint holds the branch itself).

The warm start fits the branch, which is linear, first: the training texts' bags of terms
(exactly the branch's `terms` / `shares`, a sparse [N, rows] matrix) and the head's own
loss, full-batch L-BFGS with an L2 penalty whose strength is picked on validation: the TF-IDF +
logistic regression baseline fitted in seconds inside the network. With `wide.loss:
squared_hinge` the loss is LinearSVC's instead, one-vs-rest L2-SVMs, and their margins become
log-odds by Platt scaling (multi-label: a scale and a shift per label) or the logits of one softmax
(single-label: one scale and a shift per class, `softmax_scaling`), fitted on out-of-fold margins
(where the clock has no time for the folds, the scale alone: LinearSVC's own decision kept). Without a warm start the branch learns the same words 32 texts a step (at `wide.lr`),
which on long documents a CPU budget buys a few epochs of.

The branch then stays fixed and the encoder learns what the words miss, by stacking (Wolpert
1992): a branch fitted on all the training texts has nearly zero loss on them (it can memorise
8,000 documents with 30,000 weights a label), which would leave the encoder nothing to learn from.
So the training loss sees, for each training text, the logits of a branch fitted without it
(`out_of_fold_logits`, 5 folds) in place of the full branch's: `offsets` = out-of-fold minus
in-sample logits, added to the model's output in the loss (ClassificationTask's `offsets`).
Validation, test and the exported model use the full branch, as deployed.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from scipy import sparse
from torch import Tensor, nn

from tfm_cls.bag.matrix import bag_rows, document_frequencies
from tfm_cls.classify.heads import head_for
from tfm_cls.classify.metrics import is_better
from tfm_cls.config import ClassifierConfig
from tfm_cls.config.wide import WideConfig
from tfm_cls.data.char_grams import GRAM_MIN_DF
from tfm_cls.data.ragged import as_ragged
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.errors import CheckpointError, RunDirError
from tfm_cls.model.wide import WideBranch
from tfm_cls.training import distributed as D
from tfm_cls.training.budget import FIRST_FIT
from tfm_cls.training.clock import WallClock
from tfm_cls.weights import save_tensors

logger = logging.getLogger(__name__)

OFFSETS_FILE = "wide_offsets.safetensors"
"""RUN/wide_offsets.safetensors: a warm start's training offsets and the bias fitted with the branch,
{"offsets": [rows, C] float32, "bias": [C] float32, "out_of_fold": [rows, C] float32} (the last only
where the folds were fitted; files written before the bias was kept hold the offsets only)."""
OUT_OF_FOLD = "out_of_fold"
"""The key of a bag's out-of-fold training logits in its file (`read_out_of_fold`): what the run's
choice compares two bags on besides validation (tfm_cls.classify.candidates)."""

LossFn = Callable[[Tensor, Tensor], Tensor]
"""(logits [N, C], targets) -> the mean loss over the values."""

WARM_START_C = (1.0, 10.0, 100.0, 1000.0)
"""Inverse L2 strengths tried, as scikit-learn's C: the sum of the per-output losses + ||W||^2 / (2C),
so they mean the same for any number of rows and labels. The one with the best validation score
(the run's `train.best_metric`) is kept; without a validation split, 10 (1 / C of the summed loss is
about the strength that suits an L2-normalised TF-IDF bag of a few thousand texts)."""
WARM_START_ITERATIONS = 200
"""At most this many L-BFGS iterations a fit (each a pass over the training bags, plus its line search)."""
WARM_START_FOLDS = 5
"""Folds of the out-of-fold logits the encoder trains against."""
HINGE_C = (0.1, 0.3, 1.0, 3.0, 10.0)
"""C of the squared-hinge fit, LinearSVC's (C x the sum of the losses + ||W||^2 / 2), log-spaced
around its default 1: on validation the long-tailed set's documents chose the top of a 0.25-4 grid,
go_emotions' comments its bottom (docs/tasks.md); six single-label sets chose 0.3 to 10
(benchmarks/bag_loss.py). Tried from HINGE_START out, the stronger penalty first (`next_c`: liblinear starts
every fit afresh, so the order changes no fit, only which are made): a grid the clock cuts after two or three
values keeps those nearest the default."""
HINGE_START = 1.0


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


def set_idf(branch: WideBranch, split: TokenizedSplit) -> None:
    """The `tfidf` weighting's table from the training rows: scikit-learn's smooth idf,
    ln((1 + N) / (1 + df)) + 1, and 0 for a term the rows never hold (and padding), and for a
    character gram fewer than GRAM_MIN_DF rows hold (the character view's min_df)."""
    df = document_frequencies(branch, split.input_ids)
    n = split.num_rows
    least = np.ones_like(df)
    least[branch.char_start:] = GRAM_MIN_DF  # the character view's rows (none without it)
    branch.set_idf(torch.from_numpy(np.where(df >= least, np.log((1.0 + n) / (1.0 + df)) + 1.0, 0.0)))


def bag_matrix(branch: WideBranch, split: TokenizedSplit) -> Tensor:
    """The split's rows as the branch sees them: a sparse CSR [rows, table rows] float32 matrix
    whose product with the branch's weights [table rows, C] is the branch's logits (built over whole
    arrays: tfm_cls.bag.matrix.bag_rows)."""
    return torch_csr(bag_rows(branch, split.input_ids, what=f"bags of {split.num_rows} rows"))


def torch_csr(matrix: sparse.csr_matrix) -> Tensor:
    """A scipy CSR matrix as a torch sparse CSR tensor (int64 indices, as torch's sparse ops make)."""
    with warnings.catch_warnings():  # "sparse CSR support is in beta": a product and its gradient are all we use
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                       torch.from_numpy(matrix.indices.astype(np.int64)),
                                       torch.from_numpy(matrix.data.astype(np.float32, copy=False)),
                                       size=tuple(matrix.shape))


def out_of_fold_logits(bags: Tensor, targets: Tensor, fit: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
                       num_outputs: int, folds: int = WARM_START_FOLDS, seed: int = 0) -> Tensor:
    """[N, C] logits of each row by the branch fitted (`fit(bags, targets)` -> weights, bias) on
    the other folds (seeded random folds)."""
    n = bags.shape[0]
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    rows = scipy_csr(bags)  # scipy slices rows in one pass; torch's COO index_select + coalesce sorted them
    logits = torch.empty(n, num_outputs)
    for k in range(folds):
        held = order[k::folds]
        kept = torch.ones(n, dtype=torch.bool)
        kept[held] = False
        kept = kept.nonzero(as_tuple=True)[0]
        weights, fitted_bias = fit(torch_csr(rows[kept.numpy()]), targets[kept])
        with torch.no_grad():
            logits[held] = torch_csr(rows[held.numpy()]) @ weights + fitted_bias
    return logits


def scipy_csr(bags: Tensor) -> sparse.csr_matrix:
    """A torch sparse CSR tensor as a scipy CSR matrix over the same arrays (no copy)."""
    return sparse.csr_matrix((bags.values().numpy(), bags.col_indices().numpy(), bags.crow_indices().numpy()),
                             shape=tuple(bags.shape))


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
    holds its bags already (the warm start's C grid and folds here; the few-label path's cross-validation,
    tfm_cls.train.few_label_choice). `bags`: a torch sparse CSR [N, rows] (`bag_matrix`, `torch_csr`);
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


@dataclasses.dataclass
class LinearFit:
    """A bag's fitted linear model (`fit_linear`): weights [rows, C] and bias [C] as log-odds (hinge
    margins already scaled), the C chosen and its validation score, and the training rows' logits by
    a fit without them (`out_of_fold`, None where the clock skipped the folds) and by this one (`in_sample`)."""

    weights: Tensor
    bias: Tensor
    c: float
    score: float
    out_of_fold: Tensor | None
    in_sample: Tensor
    seconds: float
    method: str
    """How it was fitted, in words (the log's)."""
    rows: np.ndarray | None = None
    """The training rows it was fitted on, where a sample (`fit_rows`): `out_of_fold` and `in_sample` are theirs;
    None: every row."""


MAX_BAG_ENTRIES = 40_000_000
"""Non-zero entries of the training bags a fit holds at most (~20 bytes each, in scipy's and torch's CSR and
liblinear's copy: ~0.8 GB): past it the bag is fitted on a seeded sample of the rows (`fit_rows`). A linear
model's score has long stopped growing there (40M entries: ~100k short texts with the character view,
~10k long documents); the encoder still trains on every row."""
ENTRY_PROBE = 2000
"""Training rows whose bags are built first to measure a row's entries."""


def fit_rows(branch: WideBranch, train: TokenizedSplit, clock: WallClock | None = None,
             what: str = "the warm start", seed: int = 0) -> np.ndarray | None:
    """The training rows a bag is fitted on: None (all) where their bags hold at most MAX_BAG_ENTRIES
    entries (measured on ENTRY_PROBE rows), else a seeded sample of as many rows as hold that many (sorted),
    said in the clock's `shrunk` and the log."""
    n = train.num_rows
    rng = np.random.default_rng(seed)
    probe = np.sort(rng.choice(n, min(n, ENTRY_PROBE), replace=False))
    per_row = bag_rows(branch, as_ragged(train.input_ids).take(probe)).nnz / max(len(probe), 1)
    cap = max(int(MAX_BAG_ENTRIES / max(per_row, 1.0)), ENTRY_PROBE)
    if n <= cap:
        return None
    said = (f"{what} fitted on a sample of {cap} of {n} training rows (~{per_row:.0f} bag entries a row; "
            f"at most {MAX_BAG_ENTRIES / 1e6:.0f}M entries held); the encoder trains on every row")
    if clock is not None:
        clock.shrink(said)
    else:
        logger.warning("%s", said)
    return np.sort(rng.choice(n, cap, replace=False))


def next_c(grid: tuple[float, ...], tried: list[float], best: float) -> float | None:
    """The hinge fit's next C (`grid` sorted), or None: a walk outwards from the first C tried, on the side
    of the best so far while it sits at the edge of what was tried, the stronger penalty first. A
    validation score is near unimodal in log C (past a worse neighbour the one beyond was never the best
    on the shared sets, docs/recipe.md), so where the smaller C beats the start the larger cannot, and
    is not fitted: the weakest penalties are the slowest liblinear fits (tnews: C 3 16 s, C 0.3 4 s)."""
    low, high = grid.index(min(tried)), grid.index(max(tried))
    if best == grid[low] and low > 0:
        return grid[low - 1]
    if best == grid[high] and high < len(grid) - 1:
        return grid[high + 1]
    return None


def next_fit_seconds(seconds_at: dict[float, float], c: float, liblinear: bool = True) -> float:
    """What a fit at `c` is expected to take, from the fits made (`seconds_at`, C -> seconds). liblinear
    starts every fit afresh, and a weaker penalty fits slower, about in proportion to C (its dual passes;
    tnews' triples: C 1 15 s, C 3 34 s, where "the slowest yet, twice" had let C 3 take their folds' time):
    the slowest yet scaled by `c` over the largest C tried; a stronger penalty than every one tried, the
    slowest yet. L-BFGS (`liblinear=False`) walks a regularisation path, each fit from the last one's
    solution, and is cut at the deadline: twice the slowest yet."""
    slowest = max(seconds_at.values())
    return slowest * max(1.0, c / max(seconds_at)) if liblinear else 2.0 * slowest


def fit_linear(branch: WideBranch, bias: Tensor, head: Any, train: TokenizedSplit, validation: TokenizedSplit | None,
               best_metric: str = "loss", labels: list[str] | None = None, loss: str = "head",
               clock: WallClock | None = None, what: str = "the warm start",
               folds_for: str = "the encoder's targets") -> LinearFit:
    """The linear model of the branch's bags of `train` (the branch's IDF table set): the head's loss
    or (`loss="squared_hinge"`) LinearSVC's, C picked by `best_metric` on validation (the head's
    metrics, decision rule tuned there first, as the engine's evaluation does; hinge margins scaled
    on validation for the judging), from `bias` [C]. The hinge's C starts at HINGE_START and walks
    (`next_c`); the head's loss rises through WARM_START_C. Under a
    wall-clock budget (`clock`) the fits stop at a deadline that leaves the encoder's loop its
    time (WallClock.plan_loop) and the end of the run its reserve (an L-BFGS fit cut short there is
    still a fit, the first always made), the grid stops past MIN_GRID values where the next fit (timed
    as the slowest yet, scaled by C where C grows) and the folds at the best C yet would pass it, and the out-of-fold fits
    (`folds_for` what) are skipped where they would;
    each cut is said in the clock's `shrunk`, naming `what` was cut."""
    started = time.monotonic()
    rows = fit_rows(branch, train, clock, what)
    clock = clock if clock is not None else WallClock(None)  # no budget: every fit affordable, no deadline
    bags = torch_csr(bag_rows(branch, train.input_ids if rows is None else as_ragged(train.input_ids).take(rows),
                              what=f"{what}: bags of {train.num_rows if rows is None else len(rows)} training rows"))
    targets = torch.from_numpy(train.row_labels(np.arange(train.num_rows) if rows is None else rows))
    hinge = loss == "squared_hinge"
    single = targets.ndim == 1  # class ids: hinge margins are one class against the rest, then one softmax
    svm_targets = nn.functional.one_hot(targets, bias.numel()).float() if hinge and single else targets
    calibrate = softmax_scaling if single else platt
    judge = _Judge.of(branch, head, validation, labels, bias.numel(), best_metric, calibrate if hinge else None)

    def fit_at(c: float, start: Tensor | None, start_bias: Tensor, deadline: float | None) -> tuple[Tensor, Tensor]:
        if hinge:
            return _fit_svm(bags, svm_targets, c)
        return fit_head_loss(bags, targets, head.loss, start_bias, c, start, deadline)

    best = _walk_grid(fit_at, bias, hinge, judge, clock, started, what)
    # each fold from zeros and the prior: starting from the full fit would carry what it learnt
    # from the held-out rows into their logits wherever L-BFGS stops short of the optimum
    c = best.c
    fit = (lambda b, t: _fit_svm(b, t, c)) if hinge else (lambda b, t: fit_head_loss(b, t, head.loss, bias, c))
    out_of_fold: Tensor | None = None
    fold_seconds = best.seconds_at[c] * _fold_factor(hinge)
    if clock.warm_start_affords(fold_seconds * WARM_START_FOLDS):
        out_of_fold = out_of_fold_logits(bags, svm_targets, fit, bias.numel())  # [rows, C]
    else:
        clock.shrink(f"no out-of-fold logits for {folds_for} ({WARM_START_FOLDS} fits of ~{fold_seconds:.0f} s; "
                     f"{max(clock.left(), 0):.0f} s left)")
    weights, fitted_bias = best.weights, best.bias
    if hinge:  # margins -> log-odds (softmax logits), fitted where the margins are those of unseen texts
        # without them, the scale alone: a training text's margin overstates how well its class
        # separates; shifts fitted there lost up to 3 validation points on 3 of 6 (set, order)
        # cases, gained 0.3 on one (benchmarks/bag_terms --scaling, docs/recipe.md)
        with torch.no_grad():
            margins = out_of_fold if out_of_fold is not None else bags @ weights + fitted_bias
        scale, shift = calibrate(margins, targets, shift=out_of_fold is not None)
        out_of_fold = None if out_of_fold is None else out_of_fold * scale + shift
        weights, fitted_bias = weights * scale, fitted_bias * scale + shift
    with torch.no_grad():
        in_sample = bags @ weights + fitted_bias  # [rows, C]
    method = ("squared hinge + " + ("softmax scaling" if single else "Platt")) if hinge else "the head's loss"
    return LinearFit(weights, fitted_bias, c, best.score, out_of_fold, in_sample, time.monotonic() - started, method,
                     rows)


def _fold_factor(hinge: bool) -> float:
    """A fold's time over its C's fit: a fold is a fit at the chosen C on 4/5 of the rows; liblinear's costs what
    that C's fit did (the weakest penalties fit slowest: tnews' C 3 took 55 s, its C 1 13 s); L-BFGS starts a
    fold from zeros, ~2x a path step."""
    return 1.0 if hinge else 2.0


@dataclasses.dataclass
class _Judge:
    """The validation split as the C grid judges a fit (`score`): its bags [rows, table rows] and targets, the
    label names, a copy of the task's head (its decision rule tuned on each fit's logits, as the engine's
    evaluation does; the task's head keeps its own) and, for hinge margins, their scaling (`calibrate`)."""

    bags: Tensor
    targets: np.ndarray
    names: list[str]
    head: Any
    best_metric: str
    calibrate: Callable[..., tuple[Tensor, Tensor]] | None

    @classmethod
    def of(cls, branch: WideBranch, head: Any, validation: TokenizedSplit | None, labels: list[str] | None,
           outputs: int, best_metric: str, calibrate: Callable[..., tuple[Tensor, Tensor]] | None) -> _Judge | None:
        """The judge of `validation` (None where there is no validation split, or it is empty)."""
        if validation is None or validation.num_rows == 0:
            return None
        return cls(bag_matrix(branch, validation), validation.row_labels(np.arange(validation.num_rows)),
                   labels or [str(i) for i in range(outputs)], copy.deepcopy(head), best_metric, calibrate)

    def score(self, weights: Tensor, bias: Tensor) -> float:
        """The validation `best_metric` of the fit (weights [table rows, C], bias [C])."""
        logits = self.bags @ weights + bias  # [rows, C]
        if self.calibrate is not None:
            scale, shift = self.calibrate(logits, torch.from_numpy(self.targets))
            logits = logits * scale + shift
        self.head.tune(logits.numpy(), self.targets)
        return float(self.head.metrics(logits.numpy(), self.targets, self.names)[self.best_metric])


@dataclasses.dataclass
class _GridBest:
    """The C grid's walk (`_walk_grid`): the best fit's validation score (nan without validation), C, weights
    [table rows, C] and bias [C], and the seconds each C's fit took."""

    score: float
    c: float
    weights: Tensor
    bias: Tensor
    seconds_at: dict[float, float]


def _walk_grid(fit_at: Callable[[float, Tensor | None, Tensor, float | None], tuple[Tensor, Tensor]], bias: Tensor,
               hinge: bool, judge: _Judge | None, clock: WallClock, started: float, what: str) -> _GridBest:
    """Fit the C grid (`fit_at(c, start weights, start bias, deadline)`): the hinge's from HINGE_START outwards
    (`next_c`), the head's loss rising through WARM_START_C, each fit from the last one's solution (a
    regularisation path); without validation (`judge` None) one C. Past MIN_GRID values the next C is fitted
    only where it and the folds at the best C yet still leave the loop and the end their time, and never
    past the warm start's deadline (said in the clock's `shrunk`). The clock records the first fit's seconds
    from `started` (FIRST_FIT)."""
    grid = (HINGE_C if hinge else WARM_START_C) if judge is not None else ((1.0,) if hinge else (10.0,))
    best: _GridBest | None = None
    weights, fitted_bias = None, bias
    seconds_at: dict[float, float] = {}  # each C's fit
    deadline = clock.warm_start_deadline()
    tried: list[float] = []
    c: float | None = HINGE_START if hinge and len(grid) > 1 else grid[0]
    while c is not None:  # L-BFGS: C rising, each fit from the last one's solution (a regularisation path)
        past_deadline = deadline is not None and time.monotonic() >= deadline
        # past MIN_GRID, the next C only where it and then the folds at the best C yet still fit: the folds
        # before the grid's breadth
        ahead = (next_fit_seconds(seconds_at, c, hinge)
                 + WARM_START_FOLDS * _fold_factor(hinge) * seconds_at[best.c]) if tried else 0.0
        if tried and (past_deadline or (len(tried) >= MIN_GRID and not clock.warm_start_affords(ahead))):
            clock.shrink(f"{what}'s C grid stopped before C {c:g} ({max(clock.left(), 0):.0f} s left; with its "
                         f"folds it would need ~{ahead:.0f} s)")
            break
        fit_started = time.monotonic()
        weights, fitted_bias = fit_at(c, weights, fitted_bias, deadline)
        score = math.nan
        if judge is not None:
            score = judge.score(weights, fitted_bias)
            logger.info("%s: C %g -> validation %s %.4f", what, c, judge.best_metric, score)
        if best is None or (judge is not None and is_better(judge.best_metric, score, best.score)):
            best = _GridBest(score, c, weights, fitted_bias, seconds_at)
        seconds_at[c] = time.monotonic() - fit_started
        if not tried:  # the bags read and one fit made: what a first fit of another bag costs
            clock.record(FIRST_FIT, time.monotonic() - started)
        tried.append(c)
        if hinge:
            c = next_c(grid, tried, best.c)
        else:
            c = grid[len(tried)] if len(tried) < len(grid) else None
    return best


def warm_start(model: nn.Module, head: Any, train: TokenizedSplit, validation: TokenizedSplit | None,
               best_metric: str = "loss", labels: list[str] | None = None,
               loss: str = "head", clock: WallClock | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Fit the branch's weights (`model.wide`) and the head's bias as a linear model of the bags
    (`fit_linear`, module docstring). Returns the training rows' offsets [rows, C] (out-of-fold minus
    in-sample logits; zero where the clock skipped the folds: the encoder trains against the full
    branch's logits, and the run's choice may still ship the branch) and what it chose (`C`, the
    validation score, `seconds`, and `bias` [C]: the bias fitted with the branch, the bag-of-terms
    model's own, which the encoder's training then moves)."""
    branch = model.wide
    bias = model.head.bias.detach().float().cpu()
    fitted = fit_linear(branch, bias, head, train, validation, best_metric, labels, loss, clock)
    with torch.no_grad():
        branch.weight.copy_(fitted.weights.to(branch.weight))
        model.head.bias.copy_(fitted.bias.to(model.head.bias))
        # the model starts as the fitted branch: the encoder's head weights at zero, so it adds
        # nothing until it learns something (at its random start it adds noise to every log-odds
        # the branch has fitted)
        model.head.weight.zero_()
    out_of_fold = fitted.out_of_fold if fitted.out_of_fold is not None else fitted.in_sample
    # a row outside the fit's sample is unseen by it: its in-sample logits are out-of-fold already (offset 0)
    offsets = torch.zeros(train.num_rows, out_of_fold.shape[1])  # [rows, C]
    offsets[slice(None) if fitted.rows is None else torch.from_numpy(fitted.rows)] = out_of_fold - fitted.in_sample
    logger.info("wide warm start: the bag-of-terms branch fitted (%s, C %g, %d training rows, %s) in %.1f s",
                fitted.method, fitted.c, train.num_rows,
                f"{WARM_START_FOLDS} folds for the encoder's targets" if fitted.out_of_fold is not None
                else "no folds", fitted.seconds)
    return offsets.numpy().astype(np.float32), {"C": fitted.c, "validation_score": fitted.score,
                                                "seconds": fitted.seconds, "bias": fitted.bias.detach().float().cpu(),
                                                # the choice compares bags on every training row's
                                                "out_of_fold": fitted.out_of_fold if fitted.rows is None else None}


MIN_GRID = 2
"""Values of the C grid fitted unless the warm start's deadline (WallClock.warm_start_deadline) has passed,
however long the last fit took: its first, the strongest penalty, was the best on none of tnews5k / trec
under a 5-minute budget (docs/recipe.md)."""
DEADLINE_CHUNK = 10
"""Under a wall-clock budget a fit checks the clock every this many L-BFGS iterations."""


def fit_branch(model: nn.Module, head: Any, splits: dict[str, TokenizedSplit], wide: WideConfig,
               best_metric: str = "loss", labels: list[str] | None = None,
               clock: WallClock | None = None) -> tuple[np.ndarray, Tensor, Tensor | None] | None:
    """Before the first step of a fresh run: the IDF table of a `tfidf` branch, then with
    `wide.warm_start` the warm start with `wide.loss` (`head`: the task's head, whose loss it
    fits), whose training offsets [rows, C], fitted bias [C] and out-of-fold training logits [rows, C]
    (None where the clock skipped the folds) it returns (None otherwise, and for a model without a
    branch)."""
    branch = getattr(model, "wide", None)
    if branch is None:
        return None
    if branch.weighting == "tfidf":
        set_idf(branch, splits["train"])
    if not wide.warm_start:
        return None
    offsets, chosen = warm_start(model, head, splits["train"], splits.get("validation"), best_metric, labels,
                                 wide.loss, clock)
    return offsets, chosen["bias"], chosen["out_of_fold"]


def start_wide(cfg: ClassifierConfig, model: nn.Module, splits: dict[str, TokenizedSplit], labels: list[str], run_dir: Path, *,
               resume: bool, env: D.DistEnv | None = None, clock: WallClock | None = None) -> np.ndarray | None:
    """The one call of a run (tfm_cls.train) before training: on a
    fresh run `fit_branch`, the warm start's offsets written to RUN/OFFSETS_FILE (rank 0); on
    resume they are read back from there (the checkpoint holds the branch itself). Returns the
    training offsets [rows, C] that ClassificationTask adds to the logits in the loss, or None
    (no warm start)."""
    if not (cfg.wide.enabled and cfg.wide.warm_start):
        if not resume:
            fit_branch(model, None, splits, cfg.wide)  # a `tfidf` branch's IDF table
        return None
    path = run_dir / OFFSETS_FILE
    if resume:
        return read_offsets(path, (splits["train"].num_rows, model.config["num_classes"]))
    head = head_for(cfg, splits["train"].labels, labels=labels)  # the task's head: the loss the branch is fitted with
    fitted = fit_branch(model, head, splits, cfg.wide, cfg.train.best_metric, labels, clock)
    if fitted is None:
        return None
    offsets, bias, out_of_fold = fitted
    if env is None or env.is_main:
        saved = {"offsets": torch.from_numpy(offsets), "bias": bias}
        if out_of_fold is not None:
            saved[OUT_OF_FOLD] = out_of_fold.detach().float().contiguous()
        save_tensors(saved, path)
    return offsets


def read_offsets(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """A resumed warm-started run's training offsets (RUN/OFFSETS_FILE), of `shape` (rows, C): one
    clear error for a missing or corrupt file, or one of another training split."""
    if not path.is_file():
        raise RunDirError(f"{path}: missing; a run with wide.warm_start writes it before its first step, "
                          "so this run directory was not made by such a run (start it again with --overwrite)")
    try:
        offsets = load_file(str(path))["offsets"].numpy()
    except Exception as err:  # safetensors raises its own error types for torn / foreign files
        raise CheckpointError(f"{path}: corrupt or not a tfm-cls offsets file ({err})") from err
    if offsets.shape != shape:
        raise RunDirError(f"{path}: offsets of shape {list(offsets.shape)}, but the training split gives "
                          f"{list(shape)}: the data changed since the run began (start it again with --overwrite)")
    return offsets


def read_out_of_fold(path: Path, shape: tuple[int, int]) -> np.ndarray | None:
    """A bag's out-of-fold training logits [rows, C] (OUT_OF_FOLD in the safetensors file `path`), or
    None where the file or the key is missing (the folds skipped, a run made before they were kept)
    or they are not of `shape` (the training split's rows and outputs)."""
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as saved:  # that one tensor, not the offsets beside it
            logits = saved.get_tensor(OUT_OF_FOLD) if OUT_OF_FOLD in saved.keys() else None  # noqa: SIM118
    except Exception as err:  # safetensors raises its own error types for torn / foreign files
        raise CheckpointError(f"{path}: corrupt or not a tfm-cls safetensors file ({err})") from err
    if logits is None or tuple(logits.shape) != tuple(shape):
        return None
    return logits.numpy()


def branch_bias(run_dir: Path) -> Tensor | None:
    """The bias the warm start fitted with the branch (RUN/OFFSETS_FILE), or None where the run has
    none (no warm start, or a file written before it was kept). With the branch it is the
    bag-of-terms model as fitted (tfm_cls.classify.candidates); the trained head's bias is fitted
    beside the encoder, not for the branch alone."""
    path = run_dir / OFFSETS_FILE
    if not path.is_file():
        return None
    try:
        return load_file(str(path)).get("bias")
    except Exception as err:  # safetensors raises its own error types for torn / foreign files
        raise CheckpointError(f"{path}: corrupt or not a tfm-cls offsets file ({err})") from err


def train_branch(model: nn.Module, wide: WideConfig) -> None:
    """How the branch trains (ClassificationTask, before the optimizer exists): kept as fitted after
    a warm start (no gradient; the encoder learns what it misses), else at `wide.lr` (None: the
    head's rate; tfm_cls.training.optim gives a module with an `lr` of its own that rate)."""
    branch = getattr(model, "wide", None)
    if branch is None:
        return
    if wide.warm_start:
        branch.requires_grad_(False)
    branch.lr = wide.lr

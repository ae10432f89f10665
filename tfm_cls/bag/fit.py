"""A bag's linear model, fitted as the warm start fits the branch (tfm_cls.bag.warm_start) and the second
bag is fitted (tfm_cls.bag.second): the training texts' bags of terms (a sparse [N, rows] matrix,
tfm_cls.bag.sparse), the head's own loss or LinearSVC's (tfm_cls.bag.solvers), C picked on validation
(`fit_linear`: the hinge's C walked outwards from HINGE_START, `next_c`; the head's loss rising through
WARM_START_C), under the run's wall clock (the grid cut short, the folds skipped, each said in the
clock's `shrunk`), and the training rows' logits by fits that did not see them (`out_of_fold_logits`,
WARM_START_FOLDS folds). Past MAX_BAG_ENTRIES the bag is fitted on a seeded sample of the rows (`fit_rows`).

    fitted = fit_linear(branch, bias, head, train, validation, best_metric, labels, loss, clock)
    fitted.weights, fitted.bias, fitted.c, fitted.score, fitted.out_of_fold, fitted.in_sample
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from tfm_cls.bag.matrix import bag_rows
from tfm_cls.bag.solvers import _fit_svm, fit_head_loss, platt, softmax_scaling
from tfm_cls.bag.sparse import bag_matrix, scipy_csr, torch_csr
from tfm_cls.classify.metrics import is_better
from tfm_cls.data.ragged import as_ragged
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.model.wide import WideBranch
from tfm_cls.training.best import unbeatable
from tfm_cls.training.budget import FIRST_FIT
from tfm_cls.training.clock import WallClock

logger = logging.getLogger(__name__)

WARM_START_C = (1.0, 10.0, 100.0, 1000.0)
"""Inverse L2 strengths tried, as scikit-learn's C: the sum of the per-output losses + ||W||^2 / (2C),
so they mean the same for any number of rows and labels. The one with the best validation score
(the run's `train.best_metric`) is kept; without a validation split, 10 (1 / C of the summed loss is
about the strength that suits an L2-normalised TF-IDF bag of a few thousand texts)."""
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
        if judge is not None and unbeatable(judge.best_metric, best.score):  # no other C can beat it
            logger.info("%s: validation %s %g, the best it can be: no other C is fitted", what, judge.best_metric,
                        best.score)
            break
        if hinge:
            c = next_c(grid, tried, best.c)
        else:
            c = grid[len(tried)] if len(tried) < len(grid) else None
    return best
MIN_GRID = 2
"""Values of the C grid fitted unless the warm start's deadline (WallClock.warm_start_deadline) has passed,
however long the last fit took: its first, the strongest penalty, was the best on none of tnews5k / trec
under a 5-minute budget (docs/recipe.md)."""

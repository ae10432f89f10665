"""Fitting the wide branch (`wide:`, tfm_cls.model.wide.WideBranch) before training, and how it
trains: the training side of the component. docs/tasks.md, "Many rare labels".

    offsets = start_wide(cfg, model, splits, labels, run_dir, resume=resume, env=env)   # tfm_cls.train
    task = ClassificationTask(..., offsets=offsets)   # which calls train_branch(model, cfg.wide)

On a fresh run: the IDF table of a `tfidf` branch and, with `wide.warm_start`, its weights fitted
as a linear model; the warm start's training offsets are written to RUN/wide_offsets.safetensors
(OFFSETS_FILE), and a resumed run reads them back (its checkpoint holds the branch itself).

The warm start fits the branch, which is linear, first (tfm_cls.bag.fit): the training texts' bags of terms
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
(tfm_cls.bag.fit.out_of_fold_logits, 5 folds) in place of the full branch's: `offsets` = out-of-fold minus
in-sample logits, added to the model's output in the loss (ClassificationTask's `offsets`).
Validation, test and the exported model use the full branch, as deployed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor, nn

from tfm_cls.bag.fit import WARM_START_FOLDS, fit_linear
from tfm_cls.bag.sparse import set_idf
from tfm_cls.classify.heads import head_for
from tfm_cls.config import ClassifierConfig
from tfm_cls.config.wide import WideConfig
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.errors import CheckpointError, RunDirError
from tfm_cls.training import distributed as D
from tfm_cls.training.clock import WallClock
from tfm_cls.weights import save_tensors

logger = logging.getLogger(__name__)

OFFSETS_FILE = "wide_offsets.safetensors"
"""RUN/wide_offsets.safetensors: a warm start's training offsets and the bias fitted with the branch,
{"offsets": [rows, C] float32, "bias": [C] float32, "out_of_fold": [rows, C] float32} (the last only
where the folds were fitted; files written before the bias was kept hold the offsets only)."""
OUT_OF_FOLD = "out_of_fold"
"""The key of a bag's out-of-fold training logits in its file (`read_out_of_fold`): what the run's
choice compares two bags on besides validation (tfm_cls.bag.candidates)."""


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
    bag-of-terms model as fitted (tfm_cls.bag.candidates); the trained head's bias is fitted
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

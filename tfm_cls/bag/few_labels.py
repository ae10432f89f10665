"""With a few labelled texts and no validation split, the choice between the classical model and the
encoder is made by cross-validation on the labelled texts, before any fine-tuning is paid for.

    choice = cross_validate(cfg, model, train_split, labels)     # tfm_cls.train, few-label regime
    choice.chosen == "bag_of_terms"  ->  choice.bag is the model the run ships (no contrastive stage)
    choice.front                     ->  metrics.json `candidates` (the card's table)

Out-of-fold logits of each candidate over k stratified folds (k = min(CV_FOLDS, the rarest class's
count), at least 2):

    bag_of_terms   the TF-IDF bag of the text's tokens and their hashed pairs (tfm_cls.model.bag) fitted
                   as a logistic regression (tfm_cls.bag.solvers.fit_head_loss: L-BFGS, C = BAG_C) on the other folds
    encoder        the pretrained encoder's unit sentence vectors, frozen, and the few-label path's
                   logistic head (contrastive.head_c) fitted on the other folds
    blend w        the mean of the two's probabilities, w the encoder's share (reported, not shipped)

The encoder's out-of-fold score is that of the frozen vectors: the contrastive fine-tuning the run
then does only moves it up (SetFit's paper, and docs/recipe.md), so it is a lower bound, and the
bag ships only where it beats that lower bound by more than one paired standard error
(tfm_cls.bag.compare.paired_se; for accuracy one text more, `tolerance`), and only with `contrastive.ship_bag: true` (off by default:
on trec at 8 a class the rule shipped the bag at 50.2 % where the fine-tuned encoder reached 81.6 %;
the bound is too low). Where the encoder does not read the texts' script (`contrastive.prefer_bag`, set by
the planner where the pretrained vocabulary reads over 1 % of the tokens as [UNK]) there is no such
bound: the bag, the cheaper, ships unless the frozen encoder beats it by that much (the run's own rule,
tfm_cls.bag.candidates). The cross-validated front is recorded either way.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from tfm_cls.bag.candidates import size_mb, texts_per_second
from tfm_cls.bag.compare import paired_se, tolerance
from tfm_cls.bag.solvers import fit_head_loss
from tfm_cls.bag.sparse import bag_matrix, scipy_csr, set_idf, torch_csr
from tfm_cls.classify.heads import head_for
from tfm_cls.classify.sentence_head import example_vectors, logistic_head
from tfm_cls.data.tokenized import TokenizedSplit, first_windows
from tfm_cls.data.tokenizer import PAD_ID
from tfm_cls.model.bag import BagOfTermsClassifier
from tfm_cls.model.wide import BUCKETS
from tfm_cls.training import budget
from tfm_cls.training.best import HIGHER_IS_BETTER
from tfm_cls.training.clock import WallClock

logger = logging.getLogger(__name__)

CV_FOLDS = 5
BAG_C = 10.0
"""The warm start's C without a validation split (WARM_START_C's default there)."""
BLEND_WEIGHTS = (0.25, 0.5, 0.75)


@dataclasses.dataclass
class FewLabelChoice:
    chosen: str
    front: list[dict[str, Any]]
    rule: str
    bag: BagOfTermsClassifier | None = None
    vectors: np.ndarray | None = None
    """[N, D] the frozen encoder's unit vectors of each labelled text's first window (what the encoder's
    folds were fitted on): the head's, where the encoder is then not trained a step (fit_contrastive)."""


def folds_of(targets: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """Held-out indices of k stratified folds (each class dealt round-robin after a seeded shuffle);
    multi-label targets [N, C] are stratified by their first label."""
    keys = targets if targets.ndim == 1 else targets.argmax(axis=1)
    rng = np.random.default_rng(seed)
    held: list[list[int]] = [[] for _ in range(k)]
    position = 0
    for value in np.unique(keys):
        members = rng.permutation(np.flatnonzero(keys == value))
        for i in members:
            held[position % k].append(int(i))
            position += 1
    return [np.asarray(sorted(h), dtype=np.int64) for h in held if h]


def ships_bag(lead: float, needed: float, ship_bag: bool, prefer_bag: bool) -> bool:
    """Whether the bag ships, from its cross-validated lead over the frozen encoder (negative: behind) and
    the lead that beats (`needed`): with `prefer_bag` (the encoder reads no pretrained meaning into the
    texts) unless the encoder beats it; else with `ship_bag` where it beats the encoder; else never."""
    return lead >= -needed if prefer_bag else ship_bag and lead > needed


def bag_model(vocab_size: int, pad_id: int | None, split: TokenizedSplit, num_outputs: int,
              skip_ids: Sequence[int]) -> BagOfTermsClassifier:
    """A bag-of-terms model over a vocabulary of `vocab_size` ids, not counting `skip_ids`, its IDF
    table from the labelled texts `split`; its weights zero until `fit_bag`."""
    max_len = max(int(split.lengths.max(initial=2)), 2)
    bag = BagOfTermsClassifier(vocab_size, num_outputs, pad_id, max(max_len, 2), "tfidf", 2, BUCKETS,
                               wide_skip_ids=list(skip_ids))
    set_idf(bag.wide, split)
    return bag


def fit_bag(bag: BagOfTermsClassifier, bags: torch.Tensor, targets: torch.Tensor, head: Any,
            deadline: float | None = None) -> BagOfTermsClassifier:
    """`bag` fitted on every labelled text: its rows `bags` [N, rows] (bag_matrix) and `targets`, the
    head's loss, C = BAG_C, stopped after the L-BFGS chunk that passes `deadline`; returns `bag`."""
    weights, bias = fit_head_loss(bags, targets, head.loss, torch.zeros(bag.bias.numel()), BAG_C, deadline=deadline)
    with torch.no_grad():
        bag.wide.weight.copy_(weights)
        bag.bias.copy_(bias)
    return bag


def fit_deadlines(clock: WallClock | None, fits: int) -> list[float | None]:
    """Each of the cross-validation's `fits` bag fits' deadline (a time.monotonic() value): the fits share
    FEW_LABEL_FIT_SHARE of the run's budget (at most what is left) in turn, evenly, from now; None each
    without a budget."""
    if clock is None or clock.budget is None:
        return [None] * fits
    start, share = time.monotonic(), min(clock.share(budget.FEW_LABEL_FIT_SHARE), max(clock.left(), 0.0))
    return [start + share * (i + 1) / fits for i in range(fits)]


def cross_validate(cfg: Any, model: nn.Module, split: TokenizedSplit, labels: list[str],
                   bag_skips: Sequence[int] = (), clock: WallClock | None = None) -> FewLabelChoice:
    """The module docstring's choice on the labelled texts `split` (the run's whole training split;
    windowed where long texts are read whole: the encoder and the bag then read each text's first
    window, the bag not counting `bag_skips`: WideConfig.skip_ids; the encoder's head the run fits
    later reads every window). Under `clock` the bag's fits (one a fold, and the
    shipped one's) each stop at their deadline (`fit_deadlines`), said in its `shrunk`."""
    # each text's first window, for the encoder as for the bag: every window of 1,000 long documents
    # (3,553) took the frozen encoder 6 minutes of a 5-minute budget before a fold was fitted
    split = first_windows(split)
    vectors = example_vectors(model, split)  # [N, D] the pretrained encoder's, frozen
    head = head_for(cfg, split.labels, labels=labels)
    targets = np.asarray(split.labels)
    metric = cfg.train.best_metric
    counts = np.bincount(targets if targets.ndim == 1 else targets.argmax(axis=1))
    k = int(max(2, min(CV_FOLDS, counts[counts > 0].min())))
    folds = folds_of(targets, k, cfg.seed)
    num_outputs = head.num_outputs(len(labels))

    bag = bag_model(model.config["vocab_size"], model.config.get("pad_token_id", PAD_ID), split, num_outputs, bag_skips)
    bags = bag_matrix(bag.wide, split)  # [N, rows] sparse
    target_tensor = torch.from_numpy(split.row_labels(list(range(split.num_rows))))
    zero_bias = torch.zeros(num_outputs)
    bag_logits = np.zeros((split.num_rows, num_outputs), np.float32)
    encoder_logits = np.zeros_like(bag_logits)
    rows = scipy_csr(bags)  # folds slice rows with scipy (torch's COO index_select + coalesce: 80 s of 100k rows)
    deadlines = fit_deadlines(clock, len(folds) + 1)
    started = time.monotonic()
    for held, deadline in zip(folds, deadlines):
        kept = np.setdiff1d(np.arange(split.num_rows), held)
        weights, bias = fit_head_loss(torch_csr(rows[kept]), target_tensor[kept], head.loss, zero_bias, BAG_C,
                                      deadline=deadline)
        held_bags = torch_csr(rows[held])
        with torch.no_grad():
            bag_logits[held] = (held_bags @ weights + bias).numpy()
        w, b = logistic_head(vectors[kept], targets[kept], num_outputs, cfg.contrastive.head_c, cfg.seed)
        encoder_logits[held] = vectors[held] @ w.T + b

    names = labels
    scored = {"bag_of_terms": bag_logits, "encoder": encoder_logits}
    probabilities = {name: head.scores(logits) for name, logits in scored.items()}
    for w in BLEND_WEIGHTS:  # probabilities mixed, back to logits for the head's metrics
        mixed = np.clip(w * probabilities["encoder"] + (1 - w) * probabilities["bag_of_terms"], 1e-7, 1 - 1e-7)
        scored[f"blend {w:g}"] = np.log(mixed) if targets.ndim == 1 else np.log(mixed / (1 - mixed))
    cv = {name: float(head.metrics(logits, targets, names)[metric]) for name, logits in scored.items()}
    needed = tolerance(metric, paired_se(head, metric, bag_logits, encoder_logits, targets, names), len(targets))
    gap = cv["bag_of_terms"] - cv["encoder"]
    cc = cfg.contrastive
    chosen = ("bag_of_terms" if ships_bag(gap if HIGHER_IS_BETTER[metric] else -gap, needed, cc.ship_bag, cc.prefer_bag)
              else "encoder")
    if chosen == "bag_of_terms":
        fit_bag(bag, bags, target_tensor, head, deadlines[-1])
    if deadlines[-1] is not None and time.monotonic() > deadlines[-1]:
        clock.shrink(f"the few-label cross-validation's bag fits stopped at their share of the budget "
                     f"({budget.FEW_LABEL_FIT_SHARE:.0%}: {time.monotonic() - started:.0f} s)")
    speed = {"bag_of_terms": texts_per_second(bag, split, bag.config["pad_token_id"] or 0),
             "encoder": texts_per_second(model, split, model.config.get("pad_token_id") or 0)}
    front = [{"name": name, "validation": {metric: value}, "scored_by": f"{k}-fold cross-validation on the "
              f"{split.num_rows} labelled texts" + (" (frozen encoder: a lower bound of the fine-tuned one)"
                                                   if name == "encoder" else ""),
              "texts_per_second": speed.get(name, 0.0), "size_mb": size_mb(bag if name == "bag_of_terms" else model)
              if name in speed else 0.0, "tolerance": needed if name == "bag_of_terms" else 0.0,
              "holds_best": name == chosen, "chosen": name == chosen, "shippable": name in speed}
             for name, value in cv.items()]
    when = ("unless the frozen encoder beats it by more than one paired standard error (contrastive.prefer_bag)"
            if cc.prefer_bag else f"only where it beats the frozen encoder's {metric} by more than one paired standard "
            f"error and contrastive.ship_bag is on ({'on' if cc.ship_bag else 'off'})")
    rule = (f"{k}-fold cross-validation on the labelled texts: the bag of terms ships {when} (with one text for "
            f"accuracy: {needed:.3f}); else the encoder is fine-tuned")
    logger.info("few labels, cross-validated %s: %s -> %s (a lead beats past %.3f)", metric,
                ", ".join(f"{n} {v:.3f}" for n, v in cv.items()), chosen, needed)
    return FewLabelChoice(chosen, front, rule, bag if chosen == "bag_of_terms" else None, vectors)

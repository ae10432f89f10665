"""Few labelled texts: SetFit's contrastive fine-tuning of the encoder (Tunstall et al. 2022,
"Efficient Few-Shot Learning Without Prompts"), a Task on the one engine, then a linear head
fitted on the sentence vectors.

    pairs = contrastive_pairs(labels, iterations=20, seed=0)     # [P, 3]: first, second, same (0 / 1)
    Engine(ContrastiveTask(...), ...).fit()                       # the body learns: same label -> cosine 1
    fit_head(model, split, multi_label=False)                     # logistic regression on the vectors

With 8 texts a class, a classification loss sees 8 gradients a class; pairs see every text with
every other (N^2 / 2 pairs), so the encoder learns which texts belong together from far more
signal than the labels alone give. The pairs are SetFit's: every combination of two texts (with
replacement), shuffled with a fixed seed, split into positives (the same label; multi-label: a
label in common) and negatives, each list cycled to `iterations` x N pairs, interleaved. The
loss is SetFit's CosineSimilarityLoss: the squared difference between the cosine of the two
sentence vectors and the pair's label (1 / 0). The head is then fitted, the body frozen, as
scikit-learn's logistic regression on the L2-normalised vectors (one-vs-rest for multi-label) and
copied into the model's linear head, so the exported model is the usual one .onnx file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfm_cls import runs as R
from tfm_cls.classify.sentence_head import example_vectors, logistic_head, sentence_vectors
from tfm_cls.data.tokenized import TokenizedSplit, collate, first_windows
from tfm_cls.training import distributed as D
from tfm_cls.training.clock import WallClock
from tfm_cls.training.engine import Engine, TrainState
from tfm_cls.training.precision import Precision
from tfm_cls.weights import save_weights

logger = logging.getLogger(__name__)


def contrastive_pairs(labels: np.ndarray, iterations: int, seed: int = 0) -> np.ndarray:
    """SetFit's pairs of the N texts whose labels are `labels` (class ids [N], or multi-hot [N, C]):
    [2 * iterations * N, 3] int64 rows (first, second, same), positives and negatives alternating.
    Every pair (i, j), i <= j, is drawn in a seeded random order; positives share a class (a label).
    A list with no pair at all (one class only, or every text alone in its class) is left out."""
    n = len(labels)
    first, second = np.triu_indices(n)  # i <= j: combinations with replacement, as SetFit's
    order = np.random.RandomState(seed).permutation(len(first))
    first, second = first[order], second[order]
    if labels.ndim == 2:  # multi-hot: a label in common
        same = (labels[first] * labels[second]).sum(axis=1) > 0
    else:
        same = labels[first] == labels[second]
    wanted = iterations * n
    parts = []
    for keep in (same, ~same):
        rows = np.stack([first[keep], second[keep], np.full(int(keep.sum()), int(keep is same))], axis=1)
        parts.append(np.resize(rows, (wanted, 3)) if len(rows) else rows)  # cycled, as SetFit's lists
    positives, negatives = parts
    if not len(positives) or not len(negatives):
        return np.concatenate([positives, negatives]).astype(np.int64)
    pairs = np.empty((2 * wanted, 3), dtype=np.int64)
    pairs[0::2], pairs[1::2] = positives, negatives
    return pairs


class SentenceEncoder(nn.Module):
    """The classifier as a sentence encoder: forward = its pooled (and, with `normalize`,
    L2-normalised) text vector [B, d_model]. A module of its own so that DDP wraps the forward the
    loss calls; it registers the classifier's body only (the head and the wide branch are fitted
    afterwards: no gradient, no DDP sync, no optimizer state). `encoder` is the classifier's, for
    the optimizer's layer-wise groups."""

    def __init__(self, classifier: nn.Module) -> None:
        super().__init__()
        object.__setattr__(self, "classifier", classifier)  # not a submodule: its head is not trained here
        self.body = nn.ModuleDict({name: module for name, module in classifier.named_children()
                                   if name not in ("head", "wide", "dropout")})

    @property
    def encoder(self) -> nn.Module:
        return self.classifier.encoder

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        return self.classifier.features(input_ids, attention_mask, token_type_ids)  # [B, D]


class ContrastiveTask:
    """Pairs of labelled texts -> SetFit's cosine loss; no validation (the schedule is fixed);
    the classifier's weights saved at the end (its head is fitted afterwards: fit_head)."""

    name = "contrastive"
    has_validation = False
    best_metric = None

    def __init__(self, classifier: nn.Module, split: TokenizedSplit, pairs: np.ndarray, batch_size: int,
                 run_dir: Path, env: D.DistEnv, pad_id: int) -> None:
        self.classifier, self.split, self.pairs = classifier, split, pairs
        self.batch_size, self.run_dir, self.env, self.pad_id = batch_size, run_dir, env, pad_id
        self.model = SentenceEncoder(classifier)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This rank's share of the pairs, in the fixed order, `batch_size` pairs a batch (the
        same every epoch: the order was drawn once, as SetFit's)."""
        rows = np.arange(len(self.pairs))[self.env.rank :: self.env.world_size]
        return [rows[i : i + self.batch_size].tolist() for i in range(0, len(rows), self.batch_size)]

    def batches(self, epoch: int, batches: list[list[int]]) -> Iterator[dict[str, Tensor]]:
        for rows in batches:
            pairs = self.pairs[rows]  # [P, 3]
            batch = collate(self.split, [*pairs[:, 0].tolist(), *pairs[:, 1].tolist()], self.pad_id)  # 2P texts
            batch["labels"] = torch.from_numpy(pairs[:, 2].astype(np.float32))  # [P] 1 = same, 0 = not
            yield batch

    def units(self, batch: dict[str, Tensor]) -> int:
        return len(batch["labels"])

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        vectors = model(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))  # [2P, D]
        first, second = vectors.float().chunk(2)  # [P, D] each
        return F.mse_loss(F.cosine_similarity(first, second, dim=-1), batch["labels"])

    def evaluate(self) -> dict[str, float]:
        return {}

    def describe(self, metrics: dict[str, float]) -> str:
        return ""

    def save_best(self) -> None:
        save_weights(self.classifier, self.run_dir / R.WEIGHTS_FILE)


def fit_head(classifier: nn.Module, split: TokenizedSplit, c: float = 1.0, seed: int = 0,
             device: torch.device | str = "cpu", vectors: np.ndarray | None = None) -> dict[str, Any]:
    """Fit the classifier's linear head as a logistic regression of the training texts' unit
    vectors (the body frozen, as SetFit's; a windowed split's texts by the mean of their windows'
    vectors, `example_vectors`; or `vectors` [N, D] given). The classifier must normalise its vectors itself
    (`normalize=True`), so that the exported model computes exactly what the head was fitted on."""
    if not classifier.config.get("normalize"):
        raise ValueError("fit_head needs a classifier built with normalize=True (its head reads unit vectors)")
    if vectors is None:
        vectors = example_vectors(classifier, split, device=device)  # [N, D]
    weight, bias = logistic_head(vectors, split.labels, classifier.head.out_features, c, seed)
    with torch.no_grad():
        classifier.head.weight.copy_(torch.from_numpy(weight))
        classifier.head.bias.copy_(torch.from_numpy(bias))
    logger.info("head: logistic regression (C %g) on %d sentence vectors", c, len(vectors))
    return {"head": "logistic_regression", "C": c, "texts": len(vectors)}


def pair_schedule(cfg: Any) -> Any:
    """The TrainConfig of the contrastive stage: SetFit's (one pass over the pairs, `contrastive.lr`
    decayed linearly to 0 after 10 % warmup, every body parameter at one rate, no evaluation); the
    run's budget, weight decay, clipping, device, precision and threads."""
    import dataclasses

    cc = cfg.contrastive
    return dataclasses.replace(
        cfg.train, epochs=1, max_steps=None, batch_size=cc.batch_size, grad_accum_steps=1, lr=cc.lr, head_lr=None,
        layerwise_lr_decay=1.0, head_only_steps=0, schedule="linear", warmup_steps=None, warmup_ratio=0.1,
        min_lr_ratio=0.0, eval_every=None, early_stopping_patience=None,
    )


def head_vectors(classifier: nn.Module, split: TokenizedSplit, clock: WallClock | None, trained: bool,
                 frozen: np.ndarray | None, device: torch.device | str) -> np.ndarray | None:
    """What the head is fitted on: None (every window of each training text, `fit_head`'s own) where the clock
    affords what the end of the run needs (its reserve counts that pass); else each text's first window
    (a windowed split), the frozen vectors `frozen` where the encoder was not `trained` a step, said in the
    clock's shrunk."""
    if clock is None or clock.budget is None or split.windows is None or clock.affords(clock.reserve()):
        return None
    clock.shrink(f"the head read each training text's first window ({split.num_rows} windows of {len(split)} texts "
                 f"would not leave the end of the run its ~{clock.reserve():.0f} s; {max(clock.left(), 0):.0f} s left)")
    if not trained and frozen is not None and len(frozen) == len(split):
        return frozen
    return sentence_vectors(classifier, first_windows(split), device=device)


def fit_contrastive(cfg: Any, classifier: nn.Module, train_split: TokenizedSplit, run_dir: Path, env: D.DistEnv,
                    amp: Precision, resume: bool, clock: WallClock | None = None,
                    frozen: np.ndarray | None = None) -> tuple[TrainState, float]:
    """The few-shot recipe's training: the pairs on the one engine (stopped by `clock` where the time left
    is what the end of the run needs), then the head fitted on the training texts' vectors (`head_vectors`;
    `frozen`: the cross-validation's, of the untrained encoder) and the weights written
    (RUN/model.safetensors); returns the engine's final state and the passes over the pairs done."""
    cc = cfg.contrastive
    pairs = contrastive_pairs(np.asarray(train_split.labels), cc.iterations, cfg.seed)  # [P, 3]
    pad_id = classifier.config.get("pad_token_id") or 0
    # the pairs read each text's first window (SetFit's truncation); the head then reads them whole
    task = ContrastiveTask(classifier, first_windows(train_split), pairs, cc.batch_size, run_dir, env, pad_id)
    logger.info("contrastive: %d pairs of %d training texts (%d iterations), batch %d, lr %g", len(pairs),
                train_split.num_rows, cc.iterations, cc.batch_size, cc.lr)
    engine = Engine(task, pair_schedule(cfg), env, amp, run_dir, clock=clock)
    state = engine.fit(resume)
    state.best_step = state.step  # the weights kept: the last (no validation selects among them)
    vectors = head_vectors(classifier, train_split, clock, state.step > 0, frozen, env.device)
    fit_head(classifier, train_split, cc.head_c, cfg.seed, env.device, vectors)
    if env.is_main:
        save_weights(classifier, run_dir / R.WEIGHTS_FILE)
    return state, state.epoch + state.position / max(engine.batches_per_epoch, 1)

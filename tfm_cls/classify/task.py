"""The classification task on the one engine: what classification adds to tfm_cls.training.engine.

ClassificationTask says how length-bucketed batches of labelled texts become a loss (the task
head's: cross-entropy with label smoothing, BCE, MSE; tfm_cls.classify.heads; plus a warm-started
wide branch's offsets, tfm_cls.bag.warm_start), how validation is scored
(accuracy / macro-F1 / loss, or the head's metrics) and what is saved (model.safetensors).
`tfm-cls train` (tfm_cls.train) and `tfm-cls distill` (tfm_cls.distill.recipe, a subclass) run it;
segment_kwargs is what both say about a from-scratch classifier's segment embedding.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from tfm_cls import runs as R
from tfm_cls.bag.warm_start import train_branch
from tfm_cls.classify.heads import head_for
from tfm_cls.classify.predict import evaluate
from tfm_cls.config import ClassifierConfig
from tfm_cls.data.tokenized import LengthBucketSampler, TokenizedSplit, batch_loader, collate, window_rows
from tfm_cls.data.tokenizer import PAD_ID
from tfm_cls.model.bag import BagOfTermsClassifier
from tfm_cls.training import distributed as D
from tfm_cls.training.precision import Precision
from tfm_cls.weights import save_weights


def segment_kwargs(cfg: ClassifierConfig) -> dict[str, int]:
    """The segment embedding of a from-scratch model: on for sentence pairs unless
    model.segment_embedding says otherwise; absent for single texts (the model is unchanged)."""
    segments = cfg.model.segment_embedding
    if segments is None:
        segments = cfg.data.text_pair_column is not None
    return {"type_vocab_size": 2} if segments else {}


PROBE_ROWS = 64
"""Validation rows a probe of the model's cost runs (`probe_cost`): spread over the split."""


@torch.no_grad()
def probe_cost(model: nn.Module, split: TokenizedSplit, pad_id: int, batch_size: int,
               device: torch.device) -> tuple[float, int]:
    """(seconds, examples): what a pass of `model` over the split costs, timed on PROBE_ROWS of its rows
    spread over it, batched by length as evaluation batches them (tfm_cls.training.clock's `measured`)."""
    n = split.num_rows
    if n == 0:
        return 0.0, 0
    rows = sorted(set(np.linspace(0, n - 1, min(PROBE_ROWS, n)).astype(int).tolist()),
                  key=lambda i: len(split.input_ids[i]))
    was_training = model.training
    model.eval()
    started = time.perf_counter()
    for i in range(0, len(rows), batch_size):
        batch = collate(split, rows[i:i + batch_size], pad_id)
        inputs = [batch["input_ids"].to(device), batch["attention_mask"].to(device)]
        model(*inputs, *([batch["token_type_ids"].to(device)] if "token_type_ids" in batch else []))
    seconds = time.perf_counter() - started
    model.train(was_training)
    examples = len(split)  # a windowed split: rows per example
    return seconds * n / len(rows), examples


class ClassificationTask:
    """Labelled texts -> cross-entropy; validation accuracy / macro-F1 / loss; best weights saved."""

    name = "classification"

    def __init__(
        self, cfg: ClassifierConfig, model: nn.Module, splits: dict[str, TokenizedSplit], labels: list[str],
        run_dir: Path, env: D.DistEnv, amp: Precision, offsets: np.ndarray | None = None,
    ) -> None:
        """`offsets` [training rows, C]: added to the model's logits in the training loss (a
        warm-started wide branch's out-of-fold minus in-sample logits: tfm_cls.bag.warm_start)."""
        tc = cfg.train
        self.cfg, self.model, self.splits, self.labels = cfg, model, splits, labels
        self.run_dir, self.env, self.amp = run_dir, env, amp
        self.best_metric = tc.best_metric
        self.task_head = head_for(cfg, splits["train"].labels, labels=labels)  # tfm_cls.classify.heads: loss, metrics, decisions
        self.pad_id = model.config.get("pad_token_id") or PAD_ID
        self.sampler = self._sampler(splits["train"].lengths) if splits["train"].windows is None else None
        self.offsets = offsets
        self.eval_cost: tuple[float, int] | None = None  # set by evaluate where it scored the bag in the model's place
        self.has_validation = "validation" in splits  # without it (data.validation_fraction: 0) the last weights are kept
        # train.eval_at_start: auto evaluates a model that starts trained (pretrained, or a fitted branch)
        self.starts_trained = cfg.model.init_from is not None or (cfg.wide.enabled and cfg.wide.warm_start)
        train_branch(model, cfg.wide)  # the wide branch: kept as fitted, or at its own rate

    def _sampler(self, lengths: np.ndarray) -> LengthBucketSampler:
        tc = self.cfg.train
        return LengthBucketSampler(
            lengths, tc.batch_size, shuffle=True, seed=self.cfg.seed, bucket_batches=tc.bucket_batches,
            rank=self.env.rank, world_size=self.env.world_size,
        )

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        train_split = self.splits["train"]
        if train_split.windows is None:
            return self.sampler.epoch_batches(epoch)
        # train.window: random: one window of each text this epoch, batched by its length
        rows = window_rows(train_split.windows, self.cfg.seed, epoch)  # [num_examples] row of each example
        return [rows[batch].tolist() for batch in self._sampler(train_split.lengths[rows]).epoch_batches(epoch)]

    def batches(self, epoch: int, batches: list[list[int]]) -> Iterator[dict[str, Tensor]]:
        loader = batch_loader(self.splits["train"], batches, self.pad_id, self.env.device, self.cfg.train.num_workers)
        if self.offsets is None:
            return loader
        return ({**batch, "offsets": torch.from_numpy(self.offsets[rows])} for rows, batch in zip(batches, loader))

    def units(self, batch: dict[str, Tensor]) -> int:
        return len(batch["labels"])

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        if "token_type_ids" in batch:  # sentence pairs
            logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])  # [B, C]
        else:
            logits = model(batch["input_ids"], batch["attention_mask"])  # [B, C]
        if "offsets" in batch:  # the warm-started branch's out-of-fold logits in place of its own
            logits = logits + batch["offsets"]  # [B, C]
        return self.task_head.loss(logits, batch["labels"])

    @property
    def eval_rows(self) -> int:
        """Texts an evaluation scores (the engine's wall clock times a row from it)."""
        return len(self.splits["validation"]) if "validation" in self.splits else 0

    def evaluate(self) -> dict[str, float]:
        # a warm-started model whose head has learnt nothing yet (step 0) is its bag of terms: the same
        # logits for a fraction of the encoder's pass; what a pass of the model itself costs is probed
        bag = self._as_bag()
        self.eval_cost = None if bag is None else probe_cost(self.model, self.splits["validation"], self.pad_id,
                                                              self.cfg.train.eval_batch_size, self.env.device)
        metrics, logits = evaluate(
            self.model if bag is None else bag, self.splits["validation"], self.labels, self.cfg.train.eval_batch_size,
            self.env.device, self.pad_id, env=self.env, amp=self.amp, head=self.task_head, tune=True,
        )
        self.last_validation = (metrics, logits)  # kept by save_best: the finish need not score them again
        return {k: metrics[k] for k in self.task_head.metric_names}

    def _as_bag(self) -> nn.Module | None:
        """The model as its bag-of-terms model where the two give the same logits (a warm-started branch
        and the encoder's head still all zeros: logits = 0 . pooled + bias + branch), else None."""
        head, branch = getattr(self.model, "head", None), getattr(self.model, "wide", None)
        if branch is None or not isinstance(head, nn.Linear) or not self.cfg.wide.warm_start or head.weight.any():
            return None
        return BagOfTermsClassifier.from_wide_and_deep(self.model, self.model.config["max_len"], head.bias.detach())

    def describe(self, metrics: dict[str, float]) -> str:
        return self.task_head.describe(metrics)

    def save_best(self) -> None:
        save_weights(self.model, self.run_dir / R.WEIGHTS_FILE)
        # the best weights' validation metrics and logits (None after a resume: the finish scores them)
        self.best_validation = getattr(self, "last_validation", None)


"""In-domain masked-language-model pretraining (`tfm-cls pretrain`): the MLM task on the one engine.

    pretrain(cfg) -> corpus (train-split texts + checked extra text) -> tokenizer -> pack -> mask
                     -> MaskedLanguageModel -> Engine(MLMTask).fit() -> encoder.safetensors

A fine-tuning run then starts from it with `model.init_from=<run_dir>`
(tfm_cls.init_from.pretraining_run): same tokenizer, encoder weights copied key for key, new head.

Run directory (names in tfm_cls.runs):
    pretrain_config.yaml    resolved PretrainConfig
    model_config.json       encoder architecture (TransformerClassifier arguments without num_classes)
    tokenizer.json          the tokenizer, reused by fine-tuning
    encoder.safetensors     encoder weights, keys exactly those of TransformerClassifier (no head)
    mlm_head.safetensors    the MLM head (its output matrix is the token embedding, so not stored)
    metrics.json            validation MLM loss / perplexity / accuracy, corpus report, timing
    history.json            curves; pretraining_curves.png (loss, perplexity, learning rate)
    last.ckpt               resumable checkpoint; train.log
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor, nn

from tfm_cls import runs as R
from tfm_cls.classify.plots import plot_pretraining_curves
from tfm_cls.config import TokenizerConfig, save_config
from tfm_cls.data.tokenized import LengthBucketSampler
from tfm_cls.data.tokenizer import (
    CLS,
    MASK,
    PAD_ID,
    SEP,
    SPECIAL_TOKENS,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)
from tfm_cls.errors import ConfigError
from tfm_cls.io import write_json
from tfm_cls.pretrain.config import PretrainConfig
from tfm_cls.pretrain.corpus import build_corpus
from tfm_cls.pretrain.masking import (
    IGNORE_INDEX,
    Document,
    MLMCollator,
    pack_documents,
    single_documents,
    tokenize_documents,
)
from tfm_cls.pretrain.model import MaskedLanguageModel, mlm_loss
from tfm_cls.training import distributed as D
from tfm_cls.training.engine import Engine, job, start_process
from tfm_cls.training.precision import Precision
from tfm_cls.training.tensorboard import TensorBoardSink
from tfm_cls.weights import save_tensors

logger = logging.getLogger(__name__)


def prepare_run_dir(cfg: PretrainConfig, *, resume: bool, overwrite: bool) -> Path:
    """As train.prepare_run_dir (runs.prepare_run_dir), for pretraining's files."""
    return R.prepare_run_dir(
        cfg, config_file=R.PRETRAIN_CONFIG_FILE, run_files=R.PRETRAIN_FILES, kind="pretraining ", resume=resume,
        overwrite=overwrite,
    )


def save_pretrained(model: MaskedLanguageModel, run_dir: Path) -> None:
    """encoder.safetensors (classifier keys) and mlm_head.safetensors, each written atomically."""
    save_tensors(model.encoder_state_dict(), run_dir / R.ENCODER_FILE)
    save_tensors(model.mlm_head.state_dict(), run_dir / R.MLM_HEAD_FILE)


def _mask_seed(seed: int, purpose: int, epoch: int, sequence: int) -> int:
    """A distinct, reproducible mask seed per (purpose: 0 train / 1 eval, epoch, sequence index)."""
    return int(np.random.SeedSequence([seed, purpose, epoch, sequence]).generate_state(1)[0])


class MLMTask:
    """Packed (or single) sequences, masked afresh per epoch -> masked-token cross-entropy; the
    validation MLM loss on fixed masks; the latest encoder saved at every evaluation."""

    name = "MLM"
    best_metric = None  # every evaluation saves the latest encoder

    def __init__(
        self, cfg: PretrainConfig, model: MaskedLanguageModel, tokenizer: Tokenizer, docs: list[Document],
        eval_docs: list[Document], run_dir: Path, env: D.DistEnv, amp: Precision,
    ) -> None:
        mc, tc = cfg.mlm, cfg.train
        self.cfg, self.model, self.docs, self.run_dir, self.env, self.amp = cfg, model, docs, run_dir, env, amp
        special = {tok: tokenizer.token_to_id(tok) for tok in SPECIAL_TOKENS}
        self.cls_id, self.sep_id = special[CLS], special[SEP]
        self.sequences_epoch = 0
        self.sequences = self._epoch_sequences(0)
        build = pack_documents if mc.pack else single_documents
        self.eval_sequences = build(eval_docs, mc.seq_len, self.cls_id, self.sep_id)[: mc.max_eval_sequences] if eval_docs else []
        self.has_validation = bool(self.eval_sequences)
        # Every epoch has the same sequence lengths (packing: the same token total), so one sampler serves all.
        self.sampler = LengthBucketSampler(
            np.asarray([len(ids) for ids, _ in self.sequences]), tc.batch_size, shuffle=True, seed=cfg.seed,
            bucket_batches=tc.bucket_batches, rank=env.rank, world_size=env.world_size,
        )
        vocab_size = tokenizer.get_vocab_size()
        self.collator = MLMCollator(
            pad_token_id=PAD_ID, mask_token_id=special[MASK],
            random_token_ids=[i for i in range(vocab_size) if i not in set(special.values())],
            mask_prob=mc.mask_prob, mask_token_frac=mc.mask_token_frac, random_token_frac=mc.random_token_frac,
            mode=mc.masking, span_geometric_p=mc.span_geometric_p, max_span=mc.max_span,
        )

    def _epoch_sequences(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Packed: a new document order (new neighbours, new cut points) every epoch."""
        mc = self.cfg.mlm
        if not mc.pack:
            return single_documents(self.docs, mc.seq_len, self.cls_id, self.sep_id)
        order = np.random.default_rng([self.cfg.seed, 7919, epoch]).permutation(len(self.docs))
        return pack_documents([self.docs[i] for i in order], mc.seq_len, self.cls_id, self.sep_id)

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        if epoch != self.sequences_epoch:
            self.sequences, self.sequences_epoch = self._epoch_sequences(epoch), epoch
        return self.sampler.epoch_batches(epoch)

    def batches(self, epoch: int, batches: list[list[int]]) -> Iterator[dict[str, Tensor]]:
        for indices in batches:
            # One mask generator per sequence, seeded by (epoch, sequence): the masks do not depend
            # on batching, rank or resumption.
            gens = [torch.Generator().manual_seed(_mask_seed(self.cfg.seed, 0, epoch, j)) for j in indices]
            yield self.collator([self.sequences[j] for j in indices], gens)

    def units(self, batch: dict[str, Tensor]) -> int:
        return int((batch["labels"] != IGNORE_INDEX).sum())

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        return mlm_loss(model, batch)[0]

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation MLM loss with fixed masks (the same every evaluation), summed over ranks."""
        model, env, tc = self.model, self.env, self.cfg.train
        model.eval()
        loss_sum, n_targets, n_correct = 0.0, 0, 0
        shard = list(range(env.rank, len(self.eval_sequences), env.world_size))
        for start in range(0, len(shard), tc.eval_batch_size):
            indices = shard[start : start + tc.eval_batch_size]
            gens = [torch.Generator().manual_seed(_mask_seed(self.cfg.seed, 1, 0, j)) for j in indices]
            batch = {k: v.to(env.device) for k, v in self.collator([self.eval_sequences[j] for j in indices], gens).items()}
            with self.amp.autocast():
                loss, logits, gold = mlm_loss(model, batch)
            n, correct = gold.numel(), int((logits.argmax(-1) == gold).sum())
            loss_sum, n_targets, n_correct = loss_sum + loss.item() * n, n_targets + n, n_correct + correct
        model.train()
        loss_sum, n_targets, n_correct = D.all_reduce([loss_sum, n_targets, n_correct], env)
        loss = loss_sum / max(n_targets, 1)
        return {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "accuracy": n_correct / max(n_targets, 1)}

    def describe(self, metrics: dict[str, float]) -> str:
        return (f"MLM loss {metrics['loss']:.4f} perplexity {metrics['perplexity']:.1f} "
                f"masked-token accuracy {metrics['accuracy']:.4f}")

    def save_best(self) -> None:
        save_pretrained(self.model, self.run_dir)


def _train_tokenizer(texts: list[str], cfg: TokenizerConfig, path: Path) -> None:
    save_tokenizer(train_tokenizer(texts, cfg), path)


def pretrain(cfg: PretrainConfig, *, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Pretrain, write the run directory; returns the contents of metrics.json.
    Under torchrun every process calls this: the same DDP path as `train` (tfm_cls.training.distributed)."""
    with job(cfg.train.device, lambda: prepare_run_dir(cfg, resume=resume, overwrite=overwrite)) as (env, run_dir):
        tc, mc = cfg.train, cfg.mlm
        amp = start_process(tc, cfg.seed, env)
        with D.main_first(env):  # rank 0 fills the datasets cache, the others read it
            corpus = build_corpus(cfg)
        if not resume:  # one tokenizer, trained by rank 0; every rank loads the saved file
            D.on_main(env, _train_tokenizer, corpus.texts, cfg.tokenizer, run_dir / R.TOKENIZER_FILE)
        tokenizer = load_tokenizer(run_dir / R.TOKENIZER_FILE)
        if tokenizer.token_to_id(MASK) is None:
            raise ConfigError(f"the tokenizer has no {MASK} token; MLM pretraining needs one")
        vocab_size = tokenizer.get_vocab_size()
        model = MaskedLanguageModel(vocab_size=vocab_size, pad_token_id=PAD_ID, **cfg.model.model_kwargs())
        model.to(env.device)
        if env.distributed:  # same initial weights everywhere (DDP broadcasts rank 0's), own dropout masks
            torch.manual_seed(cfg.seed + env.rank)
        if env.is_main:
            save_config(cfg, run_dir / R.PRETRAIN_CONFIG_FILE)
            write_json(run_dir / R.MODEL_CONFIG_FILE, model.config)

        docs = tokenize_documents(tokenizer, corpus.texts)
        task = MLMTask(cfg, model, tokenizer, docs, tokenize_documents(tokenizer, corpus.eval_texts), run_dir, env, amp)
        num_params = sum(p.numel() for p in model.parameters())
        corpus_tokens = int(sum(len(d.ids) for d in docs))
        logger.info(
            "MLM: %.2fM parameters, vocabulary %d, %d texts -> %d tokens -> %d sequences of <= %d (%s), "
            "%s masking %.0f%%, device %s, %s",
            num_params / 1e6, vocab_size, len(docs), corpus_tokens, len(task.sequences), mc.seq_len,
            "packed" if mc.pack else "one text each", mc.masking, 100 * mc.mask_prob, env.device, amp.name,
        )
        board = TensorBoardSink.open(run_dir, tc.tensorboard, fresh=not resume) if env.is_main else None
        try:
            engine = Engine(task, tc, env, amp, run_dir, sinks=[board] if board else None)
            state = engine.fit(resume)
            if board is not None:
                board.text("config", (run_dir / R.PRETRAIN_CONFIG_FILE).read_text(encoding="utf-8"), state.step)
        finally:
            if board is not None:
                board.close()
        evals = state.history["eval"]
        metrics = {
            "validation": {k: evals[-1][k] for k in ("loss", "perplexity", "accuracy")} if evals else {},
            "steps": state.step,
            "epochs": state.epoch + state.position / max(engine.batches_per_epoch, 1),
            "stopped": state.stopped,
            "train_seconds": state.seconds,
            "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
            "num_parameters": num_params,
            "vocab_size": vocab_size,
            "precision": amp.name,
            "processes": env.world_size,
            "corpus": {**corpus.report, "tokens": corpus_tokens, "sequences_per_epoch": len(task.sequences),
                       "validation_sequences": len(task.eval_sequences)},
        }
        if env.is_main:
            write_json(run_dir / R.METRICS_FILE, metrics)
            write_json(run_dir / R.HISTORY_FILE, state.history)
            plot_pretraining_curves(state.history, run_dir / R.PRETRAIN_CURVES_FILE)
            logger.info("encoder written to %s", run_dir / R.ENCODER_FILE)
        return metrics

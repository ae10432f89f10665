"""In-domain masked-language-model pretraining of the classifier's encoder (`tfm-cls pretrain`).

    pretrain(cfg) -> corpus (train-split texts + checked extra text) -> tokenizer -> pack -> mask
                     -> MaskedLanguageModel (the classifier's encoder + a tied MLM head)
                     -> AdamW + warmup/decay (train.py's) -> encoder.safetensors

A fine-tuning run then starts from it with `model.init_from=<run_dir>`, which lands in
`classifier_from_pretraining_run`: same tokenizer, encoder weights copied key for key, new head.

Run directory:
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

import argparse
import contextlib
import dataclasses
import logging
import math
import time
import typing
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor, nn
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tfm_cls import artifacts as A
from tfm_cls import distributed as D
from tfm_cls.checkpoint import (
    CheckpointError,
    atomic_path,
    resume_training_checkpoint,
    save_training_checkpoint,
)
from tfm_cls.config import (
    ConfigError,
    DataConfig,
    ModelConfig,
    TokenizerConfig,
    TrainConfig,
    load_config,
    save_config,
)
from tfm_cls.mlm import (
    IGNORE_INDEX,
    MASKING_MODES,
    MLMCollator,
    pack_documents,
    single_documents,
    tokenize_documents,
)
from tfm_cls.model import TransformerClassifier
from tfm_cls.precision import Precision
from tfm_cls.pretrain_data import CorpusError, assemble_corpus, read_hub_texts, read_text_file
from tfm_cls.tokenizer import (
    CLS,
    MASK,
    PAD_ID,
    SEP,
    SPECIAL_TOKENS,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)

logger = logging.getLogger(__name__)

CONFIG_FILE = "pretrain_config.yaml"
# The files a pretraining run shares with a classification run have the same names (artifacts.py).
MODEL_CONFIG_FILE = A.MODEL_CONFIG_FILE
TOKENIZER_FILE = A.TOKENIZER_FILE
ENCODER_FILE = "encoder.safetensors"
HEAD_FILE = "mlm_head.safetensors"
METRICS_FILE = A.METRICS_FILE
HISTORY_FILE = A.HISTORY_FILE
CURVES_FILE = "pretraining_curves.png"
LAST_CHECKPOINT = A.LAST_CHECKPOINT
LOG_FILE = A.LOG_FILE
RUN_FILES = (
    CONFIG_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILE, ENCODER_FILE, HEAD_FILE, METRICS_FILE, HISTORY_FILE,
    CURVES_FILE, LAST_CHECKPOINT, LOG_FILE,
)
# Classifier keys that pretraining does not produce: a fine-tuned model gets them new.
HEAD_PREFIXES = ("head.", "pooler.")


# ---- configuration ---------------------------------------------------------------------------------------


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


@dataclasses.dataclass(kw_only=True)
class ExtraTextConfig:
    """Unlabelled text added to the training split's texts. Checked against evaluation texts."""

    paths: list[str] = dataclasses.field(default_factory=list)
    """Local files: `.txt` (one text per line) or `.jsonl` (one object per line, field `text_field`)."""
    text_field: str = "text"
    hf_dataset: str | None = None
    """A Hugging Face dataset id (or local dataset script/folder) whose texts are added."""
    hf_config: str | None = None
    hf_split: str = "train"
    hf_text_column: str = "text"
    max_texts: int | None = None
    """Keep a seeded random subset of this many extra texts."""
    on_overlap: typing.Literal["drop", "error"] = "drop"
    """Extra texts that hold a test or validation text (pretrain_data.find_overlap): dropped, or an error."""
    overlap_ngram: int = 8
    """An extra text sharing a run of this many words with a test or validation text is overlap."""
    overlap_min_piece: int = 4
    """Shorter texts count as overlap when one is wholly a piece of the other, from this many words."""

    def __post_init__(self) -> None:
        _check(self.max_texts is None or self.max_texts > 0, f"extra_text.max_texts: expected > 0, got {self.max_texts}")
        _check(
            1 <= self.overlap_min_piece <= self.overlap_ngram,
            f"extra_text: expected 1 <= overlap_min_piece <= overlap_ngram, "
            f"got {self.overlap_min_piece} and {self.overlap_ngram}",
        )


@dataclasses.dataclass(kw_only=True)
class MLMConfig:
    """What is masked and how sequences are built."""

    mask_prob: float = 0.15
    """Share of (non-special) tokens that become prediction targets."""
    mask_token_frac: float = 0.8
    """Share of targets replaced by [MASK]."""
    random_token_frac: float = 0.1
    """Share of targets replaced by a random token; the rest stay unchanged."""
    masking: typing.Literal["token", "whole_word", "span"] = "token"
    """token: independent tokens; whole_word: all pieces of a chosen word; span: runs of words (SpanBERT)."""
    span_geometric_p: float = 0.2
    """span masking: span lengths in words ~ geometric(p) (mean 1/p), clipped at max_span."""
    max_span: int = 10
    pack: bool = True
    """Concatenate texts ([CLS] a [SEP] b [SEP] ...) into sequences of exactly seq_len tokens."""
    seq_len: int = 128
    """Tokens per packed sequence (or the truncation length without packing); <= model.max_len."""
    max_eval_sequences: int = 512
    """Validation MLM loss on at most this many sequences of the validation split's texts."""

    def __post_init__(self) -> None:
        _check(0.0 < self.mask_prob < 1.0, f"mlm.mask_prob: expected (0, 1), got {self.mask_prob}")
        _check(
            self.mask_token_frac >= 0 and self.random_token_frac >= 0 and self.mask_token_frac + self.random_token_frac <= 1,
            f"mlm.mask_token_frac + mlm.random_token_frac must be within [0, 1], got {self.mask_token_frac} + "
            f"{self.random_token_frac}",
        )
        _check(self.masking in MASKING_MODES, f"mlm.masking: expected one of {list(MASKING_MODES)}, got {self.masking!r}")
        _check(0.0 < self.span_geometric_p <= 1.0, f"mlm.span_geometric_p: expected (0, 1], got {self.span_geometric_p}")
        _check(self.max_span >= 1, f"mlm.max_span: expected >= 1, got {self.max_span}")
        _check(self.seq_len >= 3, f"mlm.seq_len: expected >= 3, got {self.seq_len}")
        _check(self.max_eval_sequences >= 1, f"mlm.max_eval_sequences: expected >= 1, got {self.max_eval_sequences}")


@dataclasses.dataclass(kw_only=True)
class PretrainConfig:
    """Everything `tfm-cls pretrain` needs; saved resolved as pretrain_config.yaml in the run directory.

    `data` is the labelled dataset the encoder will be fine-tuned on: its training split's texts
    are the default corpus, its test and validation texts are what extra text must not contain,
    and the validation texts measure the MLM loss. `train` is the classifier's TrainConfig; the
    fields that only concern a classification head must stay at their defaults.
    """

    name: str = "pretrain"
    """Run name; the run directory defaults to runs/<name>."""
    run_dir: str | None = None
    seed: int = 42
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    use_train_split: bool = True
    """Pretrain on the training split's texts (the extra text is added to them)."""
    extra_text: ExtraTextConfig = dataclasses.field(default_factory=ExtraTextConfig)
    tokenizer: TokenizerConfig = dataclasses.field(default_factory=TokenizerConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    mlm: MLMConfig = dataclasses.field(default_factory=MLMConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    """The classifier's training settings; configs/pretrain/*.yaml set MLM-friendly values
    (a small model on a small corpus learns fastest with a high peak lr, e.g. 1e-3 .. 2e-3)."""

    def __post_init__(self) -> None:
        _check(bool(self.name), "name: expected a non-empty run name")
        _check(
            self.use_train_split or bool(self.extra_text.paths) or bool(self.extra_text.hf_dataset),
            "use_train_split=false needs extra text: set extra_text.paths or extra_text.hf_dataset",
        )
        _check(
            self.mlm.seq_len <= self.model.max_len,
            f"mlm.seq_len={self.mlm.seq_len} exceeds model.max_len={self.model.max_len} (the positional encoding's size)",
        )
        _check(
            self.model.init_from is None,
            f"model.init_from={self.model.init_from!r}: pretraining starts from scratch (resume with --resume)",
        )
        defaults = TrainConfig()
        for key in ("head_lr", "layerwise_lr_decay", "head_only_steps", "label_smoothing"):
            _check(
                getattr(self.train, key) == getattr(defaults, key),
                f"train.{key} concerns a classification head and has no meaning in pretraining; "
                f"remove it (got {getattr(self.train, key)!r})",
            )

    def resolved_run_dir(self) -> Path:
        return Path(self.run_dir) if self.run_dir else Path("runs") / self.name


# ---- the model ---------------------------------------------------------------------------------------------


class MLMHead(nn.Module):
    """BERT's prediction head: dense + GELU + LayerNorm, then the output projection, whose matrix
    is the token embedding table (tied) and which has its own bias."""

    def __init__(self, d_model: int, vocab_size: int, layer_norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: Tensor, embedding_weight: Tensor) -> Tensor:
        """hidden [..., D], embedding_weight [V, D] -> logits [..., V]."""
        x = self.norm(F.gelu(self.dense(hidden)))  # [..., D]
        return F.linear(x, embedding_weight, self.bias)  # [..., V]


class MaskedLanguageModel(TransformerClassifier):
    """The classifier's encoder (same sub-modules, same state-dict keys) with an MLM head.

    It *is* a TransformerClassifier whose `head` and `pooler` are removed, so `encode` is the very
    code fine-tuning runs and `encoder_state_dict()` loads into a classifier key for key.
    """

    def __init__(self, **encoder_config: Any) -> None:
        encoder_config.pop("num_classes", None)
        super().__init__(num_classes=1, **encoder_config)
        self.head = None  # no classification head (and no pooler): every parameter gets a gradient
        self.pooler = None
        self.config.pop("num_classes")
        self.mlm_head = MLMHead(self.config["d_model"], self.config["vocab_size"], self.config["layer_norm_eps"])

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, target_mask: Tensor | None = None) -> Tensor:
        """input_ids, attention_mask [B, T] -> logits [B, T, V]; with target_mask [B, T] (bool) only
        the N selected positions: [N, V] (the projection onto the vocabulary is the costly part)."""
        hidden = self.encode(input_ids, attention_mask)  # [B, T, D]
        if target_mask is not None:
            hidden = hidden[target_mask]  # [N, D]
        return self.mlm_head(hidden, self.token_embedding.embedding.weight)

    def encoder_state_dict(self) -> dict[str, Tensor]:
        """Everything but the MLM head: exactly the keys of a TransformerClassifier minus head/pooler."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("mlm_head.")}


def mlm_loss(model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """Mean cross-entropy over the target tokens [], the MLM logits there [N, V] and their labels [N]."""
    labels = batch["labels"]  # [B, T]
    targets = labels != IGNORE_INDEX  # [B, T]
    logits = model(batch["input_ids"], batch["attention_mask"], targets)  # [N, V]
    gold = labels[targets]  # [N]
    if gold.numel() == 0:  # possible for a tiny batch: a zero loss that still touches every parameter
        return logits.sum() * 0.0, logits, gold
    return F.cross_entropy(logits.float(), gold), logits, gold


# ---- corpus ------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Corpus:
    texts: list[str]
    """Pretraining texts (train split + admitted extra text)."""
    eval_texts: list[str]
    """Validation texts: MLM loss is measured on them (never trained on)."""
    report: dict[str, Any]


def load_extra_texts(cfg: ExtraTextConfig, seed: int) -> list[str]:
    texts: list[str] = []
    for path in cfg.paths:
        loaded = read_text_file(path, cfg.text_field)
        logger.info("extra text %s: %d texts", path, len(loaded))
        texts.extend(loaded)
    if cfg.hf_dataset:
        loaded = read_hub_texts(cfg.hf_dataset, cfg.hf_config, cfg.hf_split, cfg.hf_text_column)
        logger.info("extra text %s[%s]: %d texts", cfg.hf_dataset, cfg.hf_split, len(loaded))
        texts.extend(loaded)
    if cfg.max_texts is not None and len(texts) > cfg.max_texts:
        keep = np.random.default_rng(seed).choice(len(texts), cfg.max_texts, replace=False)
        texts = [texts[i] for i in sorted(keep)]
    return texts


def build_corpus(cfg: PretrainConfig) -> Corpus:
    """The training split's texts plus extra text that holds no test or validation text."""
    from tfm_cls.data import load_data

    data = load_data(cfg.data)
    train_texts = list(data.splits["train"]["text"]) if cfg.use_train_split else []
    eval_texts = list(data.splits["validation"]["text"])
    held_out = list(data.splits["test"]["text"]) + eval_texts
    extra = load_extra_texts(cfg.extra_text, cfg.seed)
    texts, report = assemble_corpus(
        train_texts, extra, held_out, cfg.extra_text.on_overlap,
        ngram=cfg.extra_text.overlap_ngram, min_piece=cfg.extra_text.overlap_min_piece,
    )
    report["source"] = data.source
    report["validation_texts"] = len(eval_texts)
    if not texts:
        raise ConfigError("the pretraining corpus is empty (no training texts and no extra text)")
    logger.info("corpus: %s", report)
    return Corpus(texts=texts, eval_texts=eval_texts, report=report)


# ---- run directory -----------------------------------------------------------------------------------------


def prepare_run_dir(cfg: PretrainConfig, *, resume: bool, overwrite: bool) -> Path:
    """As train.prepare_run_dir (artifacts.prepare_run_dir), for pretraining's files."""
    return A.prepare_run_dir(
        cfg, config_file=CONFIG_FILE, run_files=RUN_FILES, kind="pretraining ", resume=resume, overwrite=overwrite
    )


def save_pretrained(model: MaskedLanguageModel, run_dir: Path) -> None:
    """encoder.safetensors (classifier keys) and mlm_head.safetensors, each written atomically."""
    for name, state in ((ENCODER_FILE, model.encoder_state_dict()), (HEAD_FILE, model.mlm_head.state_dict())):
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
        with atomic_path(run_dir / name) as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt"})


def plot_pretraining_curves(history: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """Loss, perplexity (exp of the loss) and learning rate against the optimizer step."""
    train, evals = history.get("train", []), history.get("eval", [])
    fig = Figure(figsize=(14, 4))
    ax_loss, ax_ppl, ax_lr = fig.subplots(1, 3)
    for rows, style, label in ((train, "-", "train"), (evals, "o-", "validation")):
        if rows:
            steps = [r["step"] for r in rows]
            ax_loss.plot(steps, [r["loss"] for r in rows], style, label=label, alpha=0.85)
            ax_ppl.plot(steps, [math.exp(min(r["loss"], 50.0)) for r in rows], style, label=label, alpha=0.85)
    if train:
        ax_lr.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax_loss.set(title="MLM loss (masked tokens)", xlabel="step")
    ax_ppl.set(title="MLM perplexity", xlabel="step", yscale="log")
    ax_lr.set(title="learning rate", xlabel="step")
    for ax in (ax_loss, ax_ppl):
        if ax.lines:
            ax.legend()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")


# ---- the loop ----------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PretrainState:
    """Everything besides model and optimizer that a resumed run needs."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of `epoch` already consumed
    seconds: float = 0.0
    tokens: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    last_eval_step: int = -1
    stopped: str = ""
    history: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=lambda: {"train": [], "eval": []})


def _mask_seed(seed: int, purpose: int, epoch: int, sequence: int) -> int:
    """A distinct, reproducible mask seed per (purpose: 0 train / 1 eval, epoch, sequence index)."""
    return int(np.random.SeedSequence([seed, purpose, epoch, sequence]).generate_state(1)[0])


def pretrain(cfg: PretrainConfig, *, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Pretrain, write the run directory; returns the contents of metrics.json.
    Under torchrun every process calls this: the same DDP path as `train` (tfm_cls.distributed)."""
    from tfm_cls.train import log_to_file

    with D.process_group(cfg.train.device) as env:
        D.quiet_other_ranks(env)
        run_dir = D.on_main(env, prepare_run_dir, cfg, resume=resume, overwrite=overwrite)
        log_file = log_to_file(run_dir / LOG_FILE) if env.is_main else contextlib.nullcontext()
        with log_file, logging_redirect_tqdm():
            return _pretrain(cfg, run_dir, resume, env)


def _train_tokenizer(texts: list[str], cfg: TokenizerConfig, path: Path) -> None:
    save_tokenizer(train_tokenizer(texts, cfg), path)


def _pretrain(cfg: PretrainConfig, run_dir: Path, resume: bool, env: D.DistEnv) -> dict[str, Any]:
    from tfm_cls.data import LengthBucketSampler
    from tfm_cls.train import affordable_total_steps, apply_lr, param_groups, seed_everything, stop_reason

    tc, mc = cfg.train, cfg.mlm
    device = env.device  # every write below is rank 0's (env.is_main)
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    seed_everything(cfg.seed)
    amp = Precision(tc.precision, device)

    with D.main_first(env):  # rank 0 fills the datasets cache, the others read it
        corpus = build_corpus(cfg)
    if not resume:  # one tokenizer, trained by rank 0; every rank loads the saved file
        D.on_main(env, _train_tokenizer, corpus.texts, cfg.tokenizer, run_dir / TOKENIZER_FILE)
    tokenizer = load_tokenizer(run_dir / TOKENIZER_FILE)
    special = {tok: tokenizer.token_to_id(tok) for tok in SPECIAL_TOKENS}
    if special[MASK] is None:
        raise ConfigError(f"the tokenizer has no {MASK} token; MLM pretraining needs one")
    vocab_size = tokenizer.get_vocab_size()
    model = MaskedLanguageModel(vocab_size=vocab_size, pad_token_id=PAD_ID, **cfg.model.model_kwargs())
    model.to(device)
    if env.distributed:  # same initial weights everywhere (DDP broadcasts rank 0's), own dropout masks
        torch.manual_seed(cfg.seed + env.rank)
    if env.is_main:
        save_config(cfg, run_dir / CONFIG_FILE)
        A.write_json(run_dir / MODEL_CONFIG_FILE, model.config)

    docs = tokenize_documents(tokenizer, corpus.texts)
    eval_docs = tokenize_documents(tokenizer, corpus.eval_texts)
    cls_id, sep_id = special[CLS], special[SEP]

    def epoch_sequences(epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Packed: a new document order (new neighbours, new cut points) every epoch."""
        if not mc.pack:
            return single_documents(docs, mc.seq_len, cls_id, sep_id)
        order = np.random.default_rng([cfg.seed, 7919, epoch]).permutation(len(docs))
        return pack_documents([docs[i] for i in order], mc.seq_len, cls_id, sep_id)

    sequences_epoch = 0
    sequences = epoch_sequences(sequences_epoch)
    build = pack_documents if mc.pack else single_documents
    eval_sequences = build(eval_docs, mc.seq_len, cls_id, sep_id)[: mc.max_eval_sequences] if eval_docs else []
    # Every epoch has the same sequence lengths (packing: the same token total), so one sampler serves all.
    sampler = LengthBucketSampler(
        np.asarray([len(ids) for ids, _ in sequences]), tc.batch_size, shuffle=True, seed=cfg.seed,
        bucket_batches=tc.bucket_batches, rank=env.rank, world_size=env.world_size,
    )
    collator = MLMCollator(
        pad_token_id=PAD_ID, mask_token_id=special[MASK],
        random_token_ids=[i for i in range(vocab_size) if i not in set(special.values())],
        mask_prob=mc.mask_prob, mask_token_frac=mc.mask_token_frac, random_token_frac=mc.random_token_frac,
        mode=mc.masking, span_geometric_p=mc.span_geometric_p, max_span=mc.max_span,
    )
    batches_per_epoch = len(sampler)
    steps_per_epoch = math.ceil(batches_per_epoch / tc.grad_accum_steps)
    planned_steps = tc.max_steps or tc.epochs * steps_per_epoch
    num_params = sum(p.numel() for p in model.parameters())
    corpus_tokens = int(sum(len(d.ids) for d in docs))
    logger.info(
        "MLM: %.2fM parameters, vocabulary %d, %d texts -> %d tokens -> %d sequences of <= %d (%s), "
        "%d batches per epoch, %d steps planned, %s masking %.0f%%, device %s, %s, %d process(es) x batch %d",
        num_params / 1e6, vocab_size, len(docs), corpus_tokens, len(sequences), mc.seq_len,
        "packed" if mc.pack else "one text each", batches_per_epoch, planned_steps, mc.masking,
        100 * mc.mask_prob, device, amp.name, env.world_size, tc.batch_size,
    )

    optimizer = torch.optim.AdamW(param_groups(model, tc), lr=tc.lr, betas=tuple(tc.betas))
    state = PretrainState()
    if resume:
        state = PretrainState(**resume_training_checkpoint(run_dir / LAST_CHECKPOINT, env, model, optimizer, amp))
        logger.info("resumed from step %d (epoch %d, batch %d)", state.step, state.epoch, state.position)
    train_model = D.wrap_model(model, env)
    pending_loss = D.DeviceSum(device)  # train loss not yet in state.loss_sum

    def checkpoint() -> None:  # a collective: every rank calls it
        state.loss_sum += pending_loss.take()
        save_training_checkpoint(run_dir / LAST_CHECKPOINT, env, model, optimizer, amp, dataclasses.asdict(state))

    @torch.no_grad()
    def run_eval() -> dict[str, float]:
        """Validation MLM loss with fixed masks (the same every evaluation), summed over ranks."""
        model.eval()
        loss_sum, n_targets, n_correct = 0.0, 0, 0
        shard = list(range(env.rank, len(eval_sequences), env.world_size))
        for start in range(0, len(shard), tc.eval_batch_size):
            indices = shard[start : start + tc.eval_batch_size]
            gens = [torch.Generator().manual_seed(_mask_seed(cfg.seed, 1, 0, j)) for j in indices]
            batch = {k: v.to(device) for k, v in collator([eval_sequences[j] for j in indices], gens).items()}
            with amp.autocast():
                loss, logits, gold = mlm_loss(model, batch)
            n, correct = gold.numel(), int((logits.argmax(-1) == gold).sum())
            loss_sum, n_targets, n_correct = loss_sum + loss.item() * n, n_targets + n, n_correct + correct
        model.train()
        loss_sum, n_targets, n_correct = D.all_reduce([loss_sum, n_targets, n_correct], env)
        loss = loss_sum / max(n_targets, 1)
        metrics = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "accuracy": n_correct / max(n_targets, 1)}
        state.last_eval_step = state.step
        state.history["eval"].append({"step": state.step, "epoch": state.epoch, **metrics})
        logger.info(
            "step %d: validation MLM loss %.4f perplexity %.1f masked-token accuracy %.4f",
            state.step, metrics["loss"], metrics["perplexity"], metrics["accuracy"],
        )
        if env.is_main:
            save_pretrained(model, run_dir)
        return metrics

    total_steps = planned_steps
    model.train()
    session_start, session_start_seconds = time.perf_counter(), state.seconds
    rate_start = (state.seconds, state.step)
    budget = tc.max_minutes * 60 if tc.max_minutes else None
    last_metrics: dict[str, float] = {}
    while not state.stopped and state.epoch < tc.epochs and state.step < planned_steps:
        if state.epoch != sequences_epoch:
            sequences, sequences_epoch = epoch_sequences(state.epoch), state.epoch
        batches = sampler.epoch_batches(state.epoch)
        bar = tqdm(
            total=len(batches), initial=state.position, desc=f"MLM epoch {state.epoch + 1}/{tc.epochs}",
            disable=not tc.progress or not env.is_main, leave=False, dynamic_ncols=True,
        )
        window_start, window_tokens = time.perf_counter(), 0
        while state.position < len(batches) and not state.stopped:
            # One optimizer step: up to grad_accum_steps micro-batches (fewer at the epoch's end).
            n_micro = min(tc.grad_accum_steps, len(batches) - state.position)
            micro_batches = []
            for indices in batches[state.position : state.position + n_micro]:
                # One mask generator per sequence, seeded by (epoch, sequence): the masks do not depend
                # on batching, rank or resumption.
                gens = [torch.Generator().manual_seed(_mask_seed(cfg.seed, 0, state.epoch, j)) for j in indices]
                micro_batches.append(collator([sequences[j] for j in indices], gens))
            # Every target token of the global step weighs the same: each rank's summed loss is divided
            # by the targets of all ranks (DDP then averages over ranks, hence the * world_size).
            local_targets = [int((b["labels"] != IGNORE_INDEX).sum()) for b in micro_batches]
            global_targets = D.all_reduce(local_targets, env)
            step_tokens = 0
            for i, batch in enumerate(micro_batches):
                step_tokens += int(batch["attention_mask"].sum())  # still on the host: no device sync
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                share = local_targets[i] / max(global_targets[i], 1.0)  # this rank's part of the step's targets
                with D.no_sync(train_model, skip=i < n_micro - 1):  # DDP all-reduces on the last micro-batch
                    with amp.autocast():
                        loss, _, _ = mlm_loss(train_model, batch)
                    amp.backward(loss * (share * env.world_size / n_micro))
                pending_loss.add(loss * share)  # summed over ranks: the micro-batch's mean loss
            seconds = session_start_seconds + (time.perf_counter() - session_start)
            if env.distributed:
                # One small collective per step gives every rank the same clock and totals, so
                # time-budget stops and learning rates cannot diverge between ranks.
                totals = D.gather_scalars([seconds, step_tokens, pending_loss.take()], env)  # [world, 3]
                seconds, step_tokens = float(totals[:, 0].max()), int(totals[:, 1].sum())
                state.loss_sum += float(totals[:, 2].sum())
            state.loss_count += n_micro
            state.tokens += step_tokens
            window_tokens += step_tokens
            scale = apply_lr(optimizer, tc, state.step, total_steps)
            amp.step(optimizer, model.parameters(), tc.grad_clip)
            state.step += 1
            state.position += n_micro
            bar.update(n_micro)

            state.seconds = seconds
            if budget is not None:
                total_steps = affordable_total_steps(state.step, state.seconds, rate_start, budget, planned_steps)
            if state.step % tc.log_every == 0 or state.position >= len(batches):
                state.loss_sum += pending_loss.take()
                now = time.perf_counter()
                mean_loss = state.loss_sum / max(state.loss_count, 1)
                tokens_per_s = window_tokens / max(now - window_start, 1e-9)
                state.history["train"].append({"step": state.step, "loss": mean_loss, "lr": tc.lr * scale})
                bar.set_postfix(loss=f"{mean_loss:.3f}", ppl=f"{math.exp(min(mean_loss, 50)):.0f}",
                                lr=f"{tc.lr * scale:.2e}", tok_s=f"{tokens_per_s:,.0f}")
                logger.debug("step %d MLM loss %.4f lr %.3e tokens/s %.0f", state.step, mean_loss, tc.lr * scale, tokens_per_s)
                state.loss_sum, state.loss_count, window_tokens, window_start = 0.0, 0, 0, now
            if tc.eval_every and state.step % tc.eval_every == 0 and eval_sequences:
                last_metrics = run_eval()
            state.stopped = stop_reason(tc, state.step, state.seconds, planned_steps) or state.stopped
            if state.position >= len(batches):
                break
            if (tc.checkpoint_every and state.step % tc.checkpoint_every == 0) or state.last_eval_step == state.step:
                checkpoint()
        bar.close()
        if state.position >= len(batches):
            state.epoch, state.position = state.epoch + 1, 0
            checkpoint()
    state.stopped = state.stopped or f"completed {tc.epochs} epochs"
    if eval_sequences and state.last_eval_step != state.step:
        last_metrics = run_eval()
    elif env.is_main:
        save_pretrained(model, run_dir)
    checkpoint()
    # Release DDP's reducer (it holds the process group, which teardown destroys) and the optimizer state.
    train_model = optimizer = None  # noqa: F841
    logger.info("pretraining stopped (%s) after %d steps, %.1f s", state.stopped, state.step, state.seconds)

    metrics = {
        "validation": last_metrics,
        "steps": state.step,
        "epochs": state.epoch + state.position / max(batches_per_epoch, 1),
        "stopped": state.stopped,
        "train_seconds": state.seconds,
        "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
        "num_parameters": num_params,
        "vocab_size": vocab_size,
        "precision": amp.name,
        "processes": env.world_size,
        "corpus": {**corpus.report, "tokens": corpus_tokens, "sequences_per_epoch": len(sequences),
                   "validation_sequences": len(eval_sequences)},
    }
    if env.is_main:
        A.write_json(run_dir / METRICS_FILE, metrics)
        A.write_json(run_dir / HISTORY_FILE, state.history)
        plot_pretraining_curves(state.history, run_dir / CURVES_FILE)
        logger.info("encoder written to %s", run_dir / ENCODER_FILE)
    return metrics


# ---- fine-tuning from a pretraining run ----------------------------------------------------------------------


def classifier_from_pretraining_run(
    run_dir: str | Path, model_cfg: ModelConfig, num_classes: int
) -> tuple[TransformerClassifier, Tokenizer]:
    """A TransformerClassifier with the pretraining run's tokenizer and encoder weights and a new head.

    As for Hugging Face checkpoints (tfm_cls.hf_import), the architecture comes from the run (its
    model_config.json) and `model_cfg` gives only what does not touch the weights: `dropout` and
    `pooling`. Weights that do not fit (e.g. a tokenizer whose vocabulary is not the embedding's)
    are a clear error, never a silent partial load.
    """
    run_dir = Path(run_dir)
    for name in (MODEL_CONFIG_FILE, TOKENIZER_FILE, ENCODER_FILE):
        if not (run_dir / name).is_file():
            raise A.RunDirError(f"model.init_from={run_dir}: not a finished pretraining run ({name} is missing)")
    encoder_config = A.read_json(run_dir / MODEL_CONFIG_FILE)
    if not isinstance(encoder_config, dict) or "vocab_size" not in encoder_config:
        raise A.RunDirError(f"{run_dir / MODEL_CONFIG_FILE}: expected a JSON object of model arguments with vocab_size")
    requested = model_cfg.model_kwargs()
    ignored = {
        k: (encoder_config[k], v)
        for k, v in requested.items()
        if k not in ("dropout", "pooling") and k in encoder_config and encoder_config[k] != v
    }
    if ignored:
        logger.info(
            "model.init_from: architecture from the pretrained encoder (%s)",
            ", ".join(f"{k}={a!r}, not the configured {b!r}" for k, (a, b) in sorted(ignored.items())),
        )
    config = {**encoder_config, "dropout": requested["dropout"], "pooling": requested["pooling"], "num_classes": num_classes}
    model = TransformerClassifier(**config)

    tokenizer = load_tokenizer(run_dir / TOKENIZER_FILE)
    vocab = tokenizer.get_vocab_size()
    if vocab != config["vocab_size"]:
        raise ConfigError(
            f"model.init_from={run_dir}: {TOKENIZER_FILE} has {vocab} tokens but the pretrained embedding has "
            f"{config['vocab_size']} rows; the tokenizer does not belong to these weights"
        )
    try:
        state = load_file(str(run_dir / ENCODER_FILE))
    except Exception as err:  # safetensors raises its own error types for torn / foreign files
        raise CheckpointError(f"{run_dir / ENCODER_FILE}: corrupt or truncated safetensors file ({err})") from err
    expected = {k: v for k, v in model.state_dict().items() if not k.startswith(HEAD_PREFIXES)}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(state) & set(expected) if state[k].shape != expected[k].shape)
    if missing or unexpected or wrong:
        detail = "; ".join(
            f"{what}: {keys[:4]}"
            for what, keys in (("missing", missing), ("unexpected", unexpected), ("shape mismatch", wrong))
            if keys
        )
        raise CheckpointError(f"{run_dir / ENCODER_FILE}: weights do not fit the classifier ({detail})")
    model.load_state_dict(state, strict=False)  # only head (and pooler) keep their fresh initialisation
    logger.info("initialised %d encoder tensors from %s; new %d-class head", len(state), run_dir, num_classes)
    return model, tokenizer


# ---- command line ------------------------------------------------------------------------------------------


def _run_pretrain(args: argparse.Namespace) -> int:
    from tfm_cls.data import DataError

    try:
        cfg = load_config(PretrainConfig, args.config, args.overrides)
        metrics = pretrain(cfg, resume=args.resume, overwrite=args.overwrite)
    except (ConfigError, A.RunDirError, CorpusError, CheckpointError, DataError) as err:
        logger.error("%s", err)
        return 2
    val = metrics.get("validation") or {}
    if val:
        logger.info("validation MLM loss %.4f, perplexity %.1f", val["loss"], val["perplexity"])
    return 0


def register_commands(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "pretrain",
        help="masked-language-model pretraining of the encoder on in-domain text",
        description="MLM pretraining; fine-tune afterwards with `tfm-cls train ... model.init_from=RUN_DIR`.",
    )
    p.add_argument("--config", help="YAML file (configs/pretrain/*.yaml); several comma-separated are merged in order")
    p.add_argument("--resume", action="store_true", help="continue the run in run_dir from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace a different run in run_dir")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted overrides, e.g. train.lr=2e-3 mlm.masking=span")
    p.set_defaults(func=_run_pretrain)

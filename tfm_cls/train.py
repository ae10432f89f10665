"""Training loop for the classifier: plain PyTorch, readable top to bottom.

    train(cfg)  ->  data -> tokenizer -> model -> AdamW + warmup/decay -> epochs of length-bucketed
                    batches -> validation evals (best checkpoint, early stopping) -> test of the best

A run is resumable at any optimizer step: the last checkpoint holds model, optimizer, RNG states,
step and the sampler's (epoch, position), and batch order is a pure function of (seed, epoch), so
a resumed run ends with the same weights and metrics as an uninterrupted one (CPU).

Under torchrun every process runs this loop on its shard of each global batch, wrapped in
DistributedDataParallel (tfm_cls.distributed); evaluation gathers every rank's predictions, and
only rank 0 writes the run directory, logs and shows progress (docs/distributed.md). Forward
passes run under the autocast of `train.precision` (tfm_cls.precision).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tfm_cls import artifacts as A
from tfm_cls import distributed as D
from tfm_cls.checkpoint import (
    load_weights,
    resume_training_checkpoint,
    save_training_checkpoint,
    save_weights,
)
from tfm_cls.config import ClassifierConfig, ConfigError, TrainConfig, save_config
from tfm_cls.data import (
    ClassificationData,
    LengthBucketSampler,
    TokenizedSplit,
    batch_loader,
    load_data,
    tokenize_splits,
)
from tfm_cls.metrics import classification_metrics, confusion, is_better, report_text
from tfm_cls.plots import plot_confusion_matrix, plot_training_curves
from tfm_cls.precision import Precision
from tfm_cls.tokenizer import (
    PAD_ID,
    configure,
    load_tokenizer,
    max_length_of,
    save_tokenizer,
    train_tokenizer,
)

logger = logging.getLogger(__name__)

RUN_FILES = (
    A.CONFIG_FILE, A.MODEL_CONFIG_FILE, A.TOKENIZER_FILE, A.LABELS_FILE, A.WEIGHTS_FILE, A.METRICS_FILE,
    A.HISTORY_FILE, A.REPORT_FILE, A.CONFUSION_FILE, A.CURVES_FILE, A.LAST_CHECKPOINT, A.LOG_FILE,
)


# ---- learning rate ---------------------------------------------------------------------------------


def get_lr(step: int, *, lr: float, warmup_steps: int, total_steps: int, schedule: str, min_lr_ratio: float) -> float:
    """Learning rate of optimizer step `step` (0-based): linear warmup, then cosine / linear decay
    to lr * min_lr_ratio at `total_steps`, or constant."""
    if step < warmup_steps:
        return lr * (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return lr
    min_lr = lr * min_lr_ratio
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "cosine":
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)
    return min_lr + (1.0 - progress) * (lr - min_lr)  # linear


def warmup_of(cfg: TrainConfig, total_steps: int) -> int:
    return cfg.warmup_steps if cfg.warmup_steps is not None else int(cfg.warmup_ratio * total_steps)


def apply_lr(optimizer: torch.optim.Optimizer, cfg: TrainConfig, step: int, total_steps: int) -> float:
    """Set every group's lr to its base lr times the schedule at `step`; return that scale."""
    scale = get_lr(step, lr=1.0, warmup_steps=warmup_of(cfg, total_steps), total_steps=total_steps,
                   schedule=cfg.schedule, min_lr_ratio=cfg.min_lr_ratio)
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * scale
    return scale


def affordable_total_steps(
    step: int, seconds: float, rate_start: tuple[float, int], budget: float, planned_steps: int
) -> int:
    """Under a time budget, the decay is stretched to end with it: project the steps still
    affordable at the rate measured since `rate_start` = (seconds, step) of this session."""
    rate = (step - rate_start[1]) / max(seconds - rate_start[0], 1e-9)
    affordable = step + int(rate * max(budget - seconds, 0.0))
    return max(step + 1, min(planned_steps, affordable))


def stop_reason(cfg: TrainConfig, step: int, seconds: float, planned_steps: int) -> str | None:
    """Why training stops after this step (planned steps reached, time budget used), or None."""
    if step >= planned_steps:
        return f"reached {planned_steps} steps"
    if cfg.max_minutes and seconds >= cfg.max_minutes * 60:
        return f"time budget of {cfg.max_minutes} minutes used"
    return None


# ---- parameters: weight-decay groups, layer-wise learning rates, head-only phase --------------------


_EMBEDDING_PREFIXES = ("token_embedding", "token_type_embedding", "positional_encoding", "embedding_norm")
_HEAD_PREFIXES = ("head", "pooler")


def _is_head(name: str) -> bool:
    return name.split(".")[0] in _HEAD_PREFIXES


def _lr_scale(name: str, num_layers: int, decay: float) -> float:
    """lr scale of a body parameter: encoder layer i (1-based) decay^(L - i), embeddings decay^L,
    anything above the last layer (final norm) 1."""
    if name.split(".")[0] in _EMBEDDING_PREFIXES:
        return decay**num_layers
    parts = name.split(".")
    if parts[:2] == ["encoder", "layers"]:
        return decay ** (num_layers - (int(parts[2]) + 1))
    return 1.0


def param_groups(model: torch.nn.Module, cfg: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: weight decay only on matrices (p.dim() >= 2); one group per learning rate.
    Each group carries `base_lr`; the schedule scales it every step."""
    num_layers = len(model.encoder.layers)
    groups: dict[tuple[float, bool], dict[str, Any]] = {}
    for name, param in model.named_parameters():
        if _is_head(name):
            base_lr = cfg.head_lr if cfg.head_lr is not None else cfg.lr
        else:
            base_lr = cfg.lr * _lr_scale(name, num_layers, cfg.layerwise_lr_decay)
        decay = param.dim() >= 2
        group = groups.setdefault(
            (base_lr, decay),
            {"params": [], "names": [], "base_lr": base_lr, "lr": base_lr, "weight_decay": cfg.weight_decay if decay else 0.0},
        )
        group["params"].append(param)
        group["names"].append(name)
    return list(groups.values())


def set_body_trainable(model: torch.nn.Module, trainable: bool) -> None:
    """Freeze / unfreeze everything but the head (frozen params get no grad, so AdamW skips them)."""
    for name, param in model.named_parameters():
        if not _is_head(name):
            param.requires_grad_(trainable)


# ---- evaluation ------------------------------------------------------------------------------------


@torch.no_grad()
def predict_logits(
    model: torch.nn.Module, split: TokenizedSplit, batch_size: int, device: torch.device, pad_id: int = PAD_ID,
    *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> np.ndarray:
    """Logits [N, C] in the split's order (batches sorted by length for speed). Under DDP each
    rank predicts its shard and the rows are gathered: every rank gets all N rows, each once."""
    env = env or D.DistEnv(device=device)
    was_training = model.training
    model.eval()
    sampler = LengthBucketSampler(split.lengths, batch_size, shuffle=False, rank=env.rank, world_size=env.world_size)
    shard = [indices for indices in sampler.epoch_batches(0) if indices]
    rows, parts = [], []
    for indices, batch in zip(shard, batch_loader(split, shard, pad_id, device)):
        with amp.autocast() if amp else contextlib.nullcontext():
            logits = model(batch["input_ids"].to(device, non_blocking=True),
                           batch["attention_mask"].to(device, non_blocking=True))  # [B, C]
        rows.extend(indices)
        parts.append(logits.float().cpu().numpy())
    num_classes = model.config["num_classes"]
    local = np.concatenate(parts) if parts else np.zeros((0, num_classes), dtype=np.float32)  # [n_rank, C]
    indices = D.all_gather_rows(np.asarray(rows, dtype=np.int64), env)  # [N]
    gathered = D.all_gather_rows(local, env)  # [N, C]
    counts = np.bincount(indices, minlength=len(split))
    if len(counts) != len(split) or not (counts == 1).all():
        raise RuntimeError(
            f"evaluation covered {int((counts > 0).sum())} of {len(split)} examples with {len(indices)} predictions: "
            "each example must be predicted exactly once"
        )
    out = np.empty((len(split), num_classes), dtype=np.float32)
    out[indices] = gathered
    model.train(was_training)
    return out


def evaluate(
    model: torch.nn.Module, split: TokenizedSplit, labels: list[str], batch_size: int, device: torch.device,
    pad_id: int = PAD_ID, *, env: D.DistEnv | None = None, amp: Precision | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    """Metrics (loss, accuracy, macro_f1, per_class, examples, seconds, texts_per_second) and the
    logits, over the whole split (gathered from every rank under DDP)."""
    start = time.perf_counter()
    logits = predict_logits(model, split, batch_size, device, pad_id, env=env, amp=amp)
    seconds = time.perf_counter() - start
    loss = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(split.labels)).item()
    metrics = {"loss": loss, **classification_metrics(split.labels, logits.argmax(-1), labels)}
    metrics.update(examples=len(logits), seconds=seconds, texts_per_second=len(logits) / max(seconds, 1e-9))
    return metrics, logits


# ---- run directory -----------------------------------------------------------------------------------


def prepare_run_dir(cfg: ClassifierConfig, *, resume: bool, overwrite: bool) -> Path:
    """Check the run directory may take this run (artifacts.prepare_run_dir) and create it."""
    return A.prepare_run_dir(
        cfg, config_file=A.CONFIG_FILE, run_files=RUN_FILES, kind="", resume=resume, overwrite=overwrite
    )


@contextlib.contextmanager
def log_to_file(path: Path) -> Iterator[None]:
    """Copy this package's log records into `path` (train.log) for the duration."""
    package_logger = logging.getLogger("tfm_cls")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    old_level = package_logger.level
    if package_logger.getEffectiveLevel() > logging.INFO:
        package_logger.setLevel(logging.INFO)
    package_logger.addHandler(handler)
    try:
        yield
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(old_level)
        handler.close()


# ---- setup -----------------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_model_and_tokenizer(
    cfg: ClassifierConfig, data: ClassificationData, run_dir: Path, resume: bool, env: D.DistEnv | None = None,
) -> tuple[torch.nn.Module, Any]:
    """The classifier and its tokenizer: from `model.init_from`, or trained on the training texts.
    Under DDP rank 0 reads the run directory or trains the tokenizer and hands it to the others
    (the run directory need not be on a disk every node sees)."""
    env = env or D.DistEnv()
    num_classes = len(data.labels)
    if resume:  # exactly what the interrupted run built (weights come from the checkpoint)
        tokenizer = D.on_main(env, load_tokenizer, run_dir / A.TOKENIZER_FILE)
        model = A.build_model(D.on_main(env, A.read_json, run_dir / A.MODEL_CONFIG_FILE))
    elif cfg.model.init_from:
        from tfm_cls.init_from import load_pretrained

        model, tokenizer = load_pretrained(cfg.model.init_from, cfg.model, num_classes)
        tokenizer = configure_truncation(tokenizer, cfg.tokenizer.max_length)
    else:
        tokenizer = D.on_main(env, train_tokenizer, data.splits["train"]["text"], cfg.tokenizer)
        model = A.build_model(
            dict(vocab_size=tokenizer.get_vocab_size(), num_classes=num_classes, pad_token_id=PAD_ID, **cfg.model.model_kwargs())
        )
    max_length, max_len = max_length_of(tokenizer), model.config["max_len"]
    if max_length > max_len:
        raise ConfigError(
            f"tokenizer.max_length={max_length} exceeds the model's positional encoding (max_len={max_len}); "
            "lower tokenizer.max_length"
        )
    if tokenizer.get_vocab_size() > model.config["vocab_size"]:
        raise ConfigError(
            f"tokenizer has {tokenizer.get_vocab_size()} tokens but the model's embedding only {model.config['vocab_size']}"
        )
    return model, tokenizer


def configure_truncation(tokenizer: Any, max_length: int) -> Any:
    """A pretrained tokenizer keeps its own template; we only set truncation (and padding)."""
    if tokenizer.post_processor is None:
        return configure(tokenizer, max_length)
    tokenizer.enable_truncation(max_length=max_length)
    if tokenizer.padding is None:  # keep a checkpoint's own padding (RoBERTa pads with <pad> = 1)
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else PAD_ID, pad_token="[PAD]")
    return tokenizer


# ---- the loop -----------------------------------------------------------------------------------------


@dataclasses.dataclass
class TrainState:
    """Everything besides model and optimizer that a resumed run needs."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # batches of `epoch` already consumed
    seconds: float = 0.0  # training wall time so far (across resumes)
    tokens: int = 0  # non-padding training tokens so far
    best_value: float | None = None
    best_step: int = -1
    bad_evals: int = 0
    last_eval_step: int = -1
    loss_sum: float = 0.0  # train loss since the last log line
    loss_count: int = 0
    stopped: str = ""
    history: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=lambda: {"train": [], "eval": []})


def train(cfg: ClassifierConfig, *, resume: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Train, evaluate and write the run directory; returns the contents of metrics.json.
    Under torchrun, every process calls this (DDP; docs/distributed.md)."""
    with D.process_group(cfg.train.device) as env:
        D.quiet_other_ranks(env)
        run_dir = D.on_main(env, prepare_run_dir, cfg, resume=resume, overwrite=overwrite)
        log_file = log_to_file(run_dir / A.LOG_FILE) if env.is_main else contextlib.nullcontext()
        with log_file, logging_redirect_tqdm():
            return _train(cfg, run_dir, resume, env)


def _train(cfg: ClassifierConfig, run_dir: Path, resume: bool, env: D.DistEnv) -> dict[str, Any]:
    tc = cfg.train
    device = env.device  # every write below is rank 0's (env.is_main)
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    seed_everything(cfg.seed)
    amp = Precision(tc.precision, device)

    with D.main_first(env):  # rank 0 fills the datasets cache, the others read it
        data = load_data(cfg.data)
    model, tokenizer = build_model_and_tokenizer(cfg, data, run_dir, resume, env)
    model.to(device)
    if env.distributed:  # same initial weights everywhere (DDP broadcasts rank 0's), own dropout masks
        torch.manual_seed(cfg.seed + env.rank)
    pad_id = model.config.get("pad_token_id") or PAD_ID
    if env.is_main:
        save_config(cfg, run_dir / A.CONFIG_FILE)
        A.write_json(run_dir / A.MODEL_CONFIG_FILE, model.config)
        A.write_json(run_dir / A.LABELS_FILE, data.labels)
        save_tokenizer(tokenizer, run_dir / A.TOKENIZER_FILE)

    with D.main_first(env):
        splits = tokenize_splits(data.splits, tokenizer)
    train_split = splits["train"]
    sampler = LengthBucketSampler(
        train_split.lengths, tc.batch_size, shuffle=True, seed=cfg.seed, bucket_batches=tc.bucket_batches,
        rank=env.rank, world_size=env.world_size,
    )
    batches_per_epoch = len(sampler)
    steps_per_epoch = math.ceil(batches_per_epoch / tc.grad_accum_steps)
    planned_steps = tc.max_steps or tc.epochs * steps_per_epoch
    num_params = sum(p.numel() for p in model.parameters())
    logger.info(
        "model: %.2fM parameters, %d layers, d_model %d; %d train batches per epoch, %d steps planned, device %s, "
        "%s, %d process(es) x batch %d",
        num_params / 1e6, len(model.encoder.layers), model.config["d_model"], batches_per_epoch, planned_steps, device,
        amp.name, env.world_size, tc.batch_size,
    )

    optimizer = torch.optim.AdamW(param_groups(model, tc), lr=tc.lr, betas=tuple(tc.betas))
    state = TrainState()
    if resume:
        state = TrainState(**resume_training_checkpoint(run_dir / A.LAST_CHECKPOINT, env, model, optimizer, amp))
        logger.info("resumed from step %d (epoch %d, batch %d)", state.step, state.epoch, state.position)
    set_body_trainable(model, state.step >= tc.head_only_steps)
    train_model = D.wrap_model(model, env)  # after freezing: DDP synchronises what requires grad now
    pending_loss = D.DeviceSum(device)  # train loss not yet in state.loss_sum

    def checkpoint() -> None:  # a collective: every rank calls it
        state.loss_sum += pending_loss.take()
        save_training_checkpoint(run_dir / A.LAST_CHECKPOINT, env, model, optimizer, amp, dataclasses.asdict(state))

    def run_eval() -> None:
        metrics, _ = evaluate(
            model, splits["validation"], data.labels, tc.eval_batch_size, device, pad_id, env=env, amp=amp
        )
        value = metrics[tc.best_metric]
        state.last_eval_step = state.step
        state.history["eval"].append(
            {"step": state.step, "epoch": state.epoch, **{k: metrics[k] for k in ("loss", "accuracy", "macro_f1")}}
        )
        if is_better(tc.best_metric, value, state.best_value):
            state.best_value, state.best_step, state.bad_evals = value, state.step, 0
            if env.is_main:
                save_weights(model, run_dir / A.WEIGHTS_FILE)
        else:
            state.bad_evals += 1
        logger.info(
            "step %d: validation loss %.4f accuracy %.4f macro-F1 %.4f (best %s %.4f at step %d)",
            state.step, metrics["loss"], metrics["accuracy"], metrics["macro_f1"], tc.best_metric,
            state.best_value, state.best_step,
        )
        if tc.early_stopping_patience and state.bad_evals >= tc.early_stopping_patience:
            state.stopped = f"early stopping: {state.bad_evals} evaluations without a better {tc.best_metric}"

    total_steps = planned_steps
    model.train()
    session_start, session_start_seconds = time.perf_counter(), state.seconds
    rate_start = (state.seconds, state.step)
    budget = tc.max_minutes * 60 if tc.max_minutes else None

    while not state.stopped and state.epoch < tc.epochs and state.step < planned_steps:
        batches = sampler.epoch_batches(state.epoch)
        loader = iter(batch_loader(train_split, batches[state.position :], pad_id, device, tc.num_workers))
        bar = tqdm(
            total=len(batches), initial=state.position, desc=f"epoch {state.epoch + 1}/{tc.epochs}",
            disable=not tc.progress or not env.is_main, leave=False, dynamic_ncols=True,
        )
        window_start, window_tokens = time.perf_counter(), 0
        while state.position < len(batches) and not state.stopped:
            # One optimizer step: up to grad_accum_steps micro-batches (fewer at the epoch's end).
            n_micro = min(tc.grad_accum_steps, len(batches) - state.position)
            step_tokens = 0
            for i in range(n_micro):
                batch = next(loader)
                step_tokens += int(batch["attention_mask"].sum())  # still on the host: no device sync
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                with D.no_sync(train_model, skip=i < n_micro - 1):  # DDP all-reduces on the last micro-batch
                    with amp.autocast():
                        logits = train_model(batch["input_ids"], batch["attention_mask"])  # [B, C]
                        loss = F.cross_entropy(logits, batch["labels"], label_smoothing=tc.label_smoothing)
                    amp.backward(loss / n_micro)
                pending_loss.add(loss)
            seconds = session_start_seconds + (time.perf_counter() - session_start)
            if env.distributed:
                # One small collective per step gives every rank the same clock and totals, so
                # time-budget stops and learning rates cannot diverge between ranks.
                totals = D.gather_scalars([seconds, step_tokens, pending_loss.take(), n_micro], env)  # [world, 4]
                seconds, step_tokens = float(totals[:, 0].max()), int(totals[:, 1].sum())
                state.loss_sum += float(totals[:, 2].sum())
                state.loss_count += int(totals[:, 3].sum())
            else:
                state.loss_count += n_micro
            state.tokens += step_tokens
            window_tokens += step_tokens
            lr = apply_lr(optimizer, tc, state.step, total_steps)
            amp.step(optimizer, model.parameters(), tc.grad_clip)
            state.step += 1
            state.position += n_micro
            bar.update(n_micro)
            if state.step == tc.head_only_steps:
                set_body_trainable(model, True)
                train_model = D.wrap_model(model, env)  # DDP takes the newly trainable parameters on

            state.seconds = seconds
            if budget is not None:
                total_steps = affordable_total_steps(state.step, state.seconds, rate_start, budget, planned_steps)
            if state.step % tc.log_every == 0 or state.position >= len(batches):
                state.loss_sum += pending_loss.take()
                now = time.perf_counter()
                tokens_per_s = window_tokens / max(now - window_start, 1e-9)
                mean_loss = state.loss_sum / max(state.loss_count, 1)
                state.history["train"].append({"step": state.step, "loss": mean_loss, "lr": tc.lr * lr})
                bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{tc.lr * lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
                logger.debug("step %d loss %.4f lr %.3e tokens/s %.0f", state.step, mean_loss, tc.lr * lr, tokens_per_s)
                state.loss_sum, state.loss_count, window_tokens, window_start = 0.0, 0, 0, now
            if tc.eval_every and state.step % tc.eval_every == 0:
                run_eval()
            state.stopped = stop_reason(tc, state.step, state.seconds, planned_steps) or state.stopped
            if state.position >= len(batches):
                break
            if (tc.checkpoint_every and state.step % tc.checkpoint_every == 0) or state.last_eval_step == state.step:
                checkpoint()
        bar.close()
        del loader  # ends its worker processes before the next epoch starts new ones
        if state.position >= len(batches):  # epoch done
            state.epoch, state.position = state.epoch + 1, 0
            if not tc.eval_every and state.last_eval_step != state.step:
                run_eval()
            checkpoint()
    if state.last_eval_step != state.step or state.best_step < 0:
        run_eval()
        checkpoint()
    # Release DDP's reducer (it holds the process group, which teardown destroys) and the optimizer state.
    train_model = optimizer = None  # noqa: F841
    state.stopped = state.stopped or f"completed {tc.epochs} epochs"
    logger.info("training stopped (%s) after %d steps, %.1f s", state.stopped, state.step, state.seconds)
    epochs_done = state.epoch + state.position / batches_per_epoch
    return finish_run(cfg, run_dir, model, data, splits, state, env, amp, pad_id, num_params, epochs_done)


def finish_run(
    cfg: ClassifierConfig, run_dir: Path, model: torch.nn.Module, data: ClassificationData,
    splits: dict[str, TokenizedSplit], state: TrainState, env: D.DistEnv, amp: Precision, pad_id: int,
    num_params: int, epochs_done: float,
) -> dict[str, Any]:
    """Evaluate the best weights on validation and test; write metrics, report and figures (rank 0)."""
    D.on_main(env, load_weights, model, run_dir / A.WEIGHTS_FILE)
    D.broadcast_module(model, env)  # the other ranks may not see rank 0's disk
    tc, device = cfg.train, env.device
    results: dict[str, Any] = {}
    results["validation"], _ = evaluate(
        model, splits["validation"], data.labels, tc.eval_batch_size, device, pad_id, env=env, amp=amp
    )
    results["test"], test_logits = evaluate(
        model, splits["test"], data.labels, tc.eval_batch_size, device, pad_id, env=env, amp=amp
    )
    predictions = test_logits.argmax(-1)
    test = splits["test"]
    metrics = {
        **results,
        "best_step": state.best_step,
        "best_metric": tc.best_metric,
        "steps": state.step,
        "epochs": epochs_done,
        "stopped": state.stopped,
        "train_seconds": state.seconds,
        "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
        "num_parameters": num_params,
        "device": str(device),
        "precision": amp.name,
        "world_size": env.world_size,
        "labels": data.labels,
        "data": {
            "source": data.source,
            "carved_from_train": data.carved,
            **{f"{name}_examples": len(split) for name, split in splits.items()},
            "truncated": {name: split.num_truncated for name, split in splits.items()},
            "empty": {name: split.num_empty for name, split in splits.items()},
        },
    }
    if env.is_main:
        A.write_json(run_dir / A.METRICS_FILE, metrics)
        A.write_json(run_dir / A.HISTORY_FILE, state.history)
        (run_dir / A.REPORT_FILE).write_text(report_text(test.labels, predictions, data.labels), encoding="utf-8")
        plot_confusion_matrix(
            confusion(test.labels, predictions, len(data.labels)), data.labels, run_dir / A.CONFUSION_FILE
        )
        plot_training_curves(state.history, run_dir / A.CURVES_FILE, tc.best_metric)
    logger.info(
        "best (step %d): validation accuracy %.4f macro-F1 %.4f | test accuracy %.4f macro-F1 %.4f -> %s",
        state.best_step, results["validation"]["accuracy"], results["validation"]["macro_f1"],
        results["test"]["accuracy"], results["test"]["macro_f1"], run_dir,
    )
    return metrics

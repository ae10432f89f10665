"""Classification training (`tfm-cls train`): the classification task on the one engine.

    train(cfg)  ->  data -> tokenizer -> model -> Engine(ClassificationTask).fit() -> test of the best

The engine (tfm_cls.engine) runs the steps, evaluations, checkpoints and stops; this module says
what classification adds: length-bucketed batches of labelled texts, cross-entropy (with label
smoothing), validation accuracy / macro-F1 / loss, the best weights as model.safetensors, and at
the end the validation and test metrics of the best weights, the report and the figures.

Under torchrun every process runs this on its shard of each global batch (docs/distributed.md):
evaluation gathers every rank's predictions, and only rank 0 writes the run directory.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from tokenizers import Tokenizer
from torch import Tensor, nn

from tfm_cls import distributed as D
from tfm_cls import runs as R
from tfm_cls.batching import LengthBucketSampler, TokenizedSplit, batch_loader, tokenize_splits, window_rows
from tfm_cls.card import write_card
from tfm_cls.checkpoint import load_weights, save_weights
from tfm_cls.config import ClassifierConfig, save_config
from tfm_cls.data import ClassificationData, load_data
from tfm_cls.engine import Engine, ScalarSink, TrainState, job, start_process
from tfm_cls.errors import ConfigError
from tfm_cls.io import read_json, write_json, write_text
from tfm_cls.metrics import confusion, report_text
from tfm_cls.plots import plot_confusion_matrix, plot_training_curves
from tfm_cls.precision import Precision
from tfm_cls.predict import evaluate
from tfm_cls.tasks import MULTI_LABEL, REGRESSION, SINGLE_LABEL, head_for
from tfm_cls.tensorboard import TensorBoardSink
from tfm_cls.tokenizer import (
    PAD_ID,
    auto_max_length,
    configure_truncation,
    load_tokenizer,
    long_text_of,
    max_length_of,
    save_tokenizer,
    train_tokenizer,
)

logger = logging.getLogger(__name__)

C = typing.TypeVar("C")


def prepare_run_dir(cfg: ClassifierConfig, *, resume: bool, overwrite: bool) -> Path:
    """Check the run directory may take this run (runs.prepare_run_dir) and create it. A length
    left `auto` matches the number a run of the same config saved (resolution is deterministic)."""
    return R.prepare_run_dir(
        _as_saved(cfg), config_file=R.CONFIG_FILE, run_files=R.CLASSIFIER_FILES, kind="", resume=resume,
        overwrite=overwrite,
    )


def _as_saved(cfg: ClassifierConfig) -> ClassifierConfig:
    """`cfg` with its `auto` lengths replaced by those the run directory's config.yaml resolved."""
    saved_file = cfg.resolved_run_dir() / R.CONFIG_FILE
    if "auto" not in (cfg.tokenizer.max_length, cfg.model.max_len) or not saved_file.is_file():
        return cfg
    saved = yaml.safe_load(saved_file.read_text(encoding="utf-8")) or {}
    length, limit = saved.get("tokenizer", {}).get("max_length"), saved.get("model", {}).get("max_len")
    if not isinstance(length, int) or not isinstance(limit, int):
        return cfg
    return resolved_lengths(cfg, length, limit if cfg.model.max_len == "auto" else cfg.model.max_len)


def resolved_lengths(cfg: C, max_length: int, max_len: int | str) -> C:
    """`cfg` (a ClassifierConfig, or any config with tokenizer and model sections, e.g. a
    DistillConfig) with tokenizer.max_length and model.max_len set to the numbers chosen for them."""
    try:
        tokenizer = dataclasses.replace(cfg.tokenizer, max_length=max_length)
        return dataclasses.replace(cfg, tokenizer=tokenizer, model=dataclasses.replace(cfg.model, max_len=max_len))
    except ValueError as err:  # e.g. a stride no longer smaller than the window chosen
        raise ConfigError(f"with tokenizer.max_length auto = {max_length}: {err}") from None


def build_model_and_tokenizer(
    cfg: ClassifierConfig, data: ClassificationData, run_dir: Path, resume: bool, env: D.DistEnv | None = None,
) -> tuple[nn.Module, Tokenizer]:
    """The classifier and its tokenizer: from `model.init_from`, or trained on the training texts.
    Under DDP rank 0 reads the run directory or trains the tokenizer and hands it to the others
    (the run directory need not be on a disk every node sees)."""
    env = env or D.DistEnv()
    num_classes = head_for(cfg).num_outputs(len(data.labels))
    auto = cfg.tokenizer.max_length == "auto"
    if resume:  # exactly what the interrupted run built (weights come from the checkpoint)
        tokenizer = D.on_main(env, load_tokenizer, run_dir / R.TOKENIZER_FILE)
        model = R.build_model(D.on_main(env, read_json, run_dir / R.MODEL_CONFIG_FILE))
    elif cfg.model.init_from:
        from tfm_cls.pretrained import load_pretrained

        model, tokenizer = load_pretrained(cfg.model.init_from, cfg.model, num_classes)
        length = cfg.tokenizer.max_length
        if auto:
            length = D.on_main(env, auto_max_length, tokenizer, data.splits["train"]["text"], cfg.tokenizer,
                               model.config["max_len"])
        tokenizer = configure_truncation(tokenizer, length)
    else:
        train_split = data.splits["train"]
        texts = train_split["text"]
        if "text_pair" in train_split.column_names:  # the vocabulary covers both sides of a pair
            texts = [*texts, *train_split["text_pair"]]
        # `auto` lengths: the tokenizer (whose vocabulary does not depend on them) measures the
        # training texts, and the model's position table is sized to the length chosen.
        limit = None if cfg.model.max_len == "auto" else cfg.model.max_len
        tokenizer = D.on_main(env, train_tokenizer, texts, cfg.tokenizer, limit)
        max_len = max_length_of(tokenizer) if cfg.model.max_len == "auto" else cfg.model.max_len
        model_kwargs = dataclasses.replace(cfg.model, max_len=max_len).model_kwargs()
        model = R.build_model(
            dict(vocab_size=tokenizer.get_vocab_size(), num_classes=num_classes, pad_token_id=PAD_ID,
                 **model_kwargs, **segment_kwargs(cfg))
        )
    if not resume and cfg.data.task == REGRESSION:
        start_at_mean_target(model, data.splits["train"]["label"])
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


def segment_kwargs(cfg: ClassifierConfig) -> dict[str, int]:
    """The segment embedding of a from-scratch model: on for sentence pairs unless
    model.segment_embedding says otherwise; absent for single texts (the model is unchanged)."""
    segments = cfg.model.segment_embedding
    if segments is None:
        segments = cfg.data.text_pair_column is not None
    return {"type_vocab_size": 2} if segments else {}


def start_at_mean_target(model: nn.Module, targets) -> None:
    """A regression head starts at the mean training target, so the first steps learn the signal, not the offset."""
    with torch.no_grad():
        model.head.bias.fill_(float(np.mean(targets)))


class ClassificationTask:
    """Labelled texts -> cross-entropy; validation accuracy / macro-F1 / loss; best weights saved."""

    name = "classification"
    has_validation = True

    def __init__(
        self, cfg: ClassifierConfig, model: nn.Module, splits: dict[str, TokenizedSplit], labels: list[str],
        run_dir: Path, env: D.DistEnv, amp: Precision,
    ) -> None:
        tc = cfg.train
        self.cfg, self.model, self.splits, self.labels = cfg, model, splits, labels
        self.run_dir, self.env, self.amp = run_dir, env, amp
        self.best_metric = tc.best_metric
        train_targets = splits["train"].labels if cfg.data.task == MULTI_LABEL else None
        self.task_head = head_for(cfg, train_targets)  # tfm_cls.tasks: loss, metrics, decisions
        self.pad_id = model.config.get("pad_token_id") or PAD_ID
        self.sampler = self._sampler(splits["train"].lengths) if splits["train"].windows is None else None

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
        return batch_loader(self.splits["train"], batches, self.pad_id, self.env.device, self.cfg.train.num_workers)

    def units(self, batch: dict[str, Tensor]) -> int:
        return len(batch["labels"])

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
        if "token_type_ids" in batch:  # sentence pairs
            logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])  # [B, C]
        else:
            logits = model(batch["input_ids"], batch["attention_mask"])  # [B, C]
        return self.task_head.loss(logits, batch["labels"])

    def evaluate(self) -> dict[str, float]:
        metrics, _ = evaluate(
            self.model, self.splits["validation"], self.labels, self.cfg.train.eval_batch_size, self.env.device,
            self.pad_id, env=self.env, amp=self.amp, head=self.task_head, tune=True,
        )
        return {k: metrics[k] for k in self.task_head.metric_names}

    def describe(self, metrics: dict[str, float]) -> str:
        return self.task_head.describe(metrics)

    def save_best(self) -> None:
        save_weights(self.model, self.run_dir / R.WEIGHTS_FILE)


def train(
    cfg: ClassifierConfig, *, resume: bool = False, overwrite: bool = False,
    sinks: list[ScalarSink] | None = None, score_test: bool = True,
) -> dict[str, Any]:
    """Train, evaluate and write the run directory; returns the contents of metrics.json.
    Under torchrun, every process calls this (DDP; docs/distributed.md).

    `sinks` receive the engine's scalars besides TensorBoard (e.g. a tuning trial's pruner);
    `score_test=False` drops the test split right after loading, before anything is tokenized or
    scored: metrics.json then holds validation only (hyperparameter search, tfm_cls.tune)."""
    with job(cfg.train.device, lambda: prepare_run_dir(cfg, resume=resume, overwrite=overwrite)) as (env, run_dir):
        amp = start_process(cfg.train, cfg.seed, env)
        with D.main_first(env):  # rank 0 fills the datasets cache, the others read it
            data = load_data(cfg.data)
        if not score_test:
            data.splits.pop("test", None)
        model, tokenizer = build_model_and_tokenizer(cfg, data, run_dir, resume, env)
        cfg = resolved_lengths(cfg, max_length_of(tokenizer), model.config["max_len"] if cfg.model.max_len == "auto"
                               else cfg.model.max_len)  # saved below as numbers
        model.to(env.device)
        if env.distributed:  # same initial weights everywhere (DDP broadcasts rank 0's), own dropout masks
            torch.manual_seed(cfg.seed + env.rank)
        if env.is_main:
            save_config(cfg, run_dir / R.CONFIG_FILE)
            write_json(run_dir / R.MODEL_CONFIG_FILE, model.config)
            write_json(run_dir / R.LABELS_FILE, data.labels)
            save_tokenizer(tokenizer, run_dir / R.TOKENIZER_FILE)
        with D.main_first(env):
            splits = tokenize_splits(data.splits, tokenizer, long_text_of(cfg.tokenizer, cfg.inference),
                                     train_windows=cfg.train.window == "random")
        task = ClassificationTask(cfg, model, splits, data.labels, run_dir, env, amp)
        logger.info(
            "model: %.2fM parameters, %d layers, d_model %d, device %s, %s",
            sum(p.numel() for p in model.parameters()) / 1e6, len(model.encoder.layers), model.config["d_model"],
            env.device, amp.name,
        )
        board = TensorBoardSink.open(run_dir, cfg.train.tensorboard, fresh=not resume) if env.is_main else None
        try:
            engine = Engine(task, cfg.train, env, amp, run_dir, sinks=[s for s in (board, *(sinks or [])) if s])
            warmup = cfg.train.warmup_steps
            if warmup is not None and warmup >= engine.planned_steps:
                logger.warning(
                    "train.warmup_steps=%d is not below the %d planned steps: the learning rate never reaches "
                    "train.lr=%g; lower train.warmup_steps (or set train.warmup_ratio)", warmup, engine.planned_steps,
                    cfg.train.lr,
                )
            state = engine.fit(resume)
            return finish_run(task, data, state, state.epoch + state.position / engine.batches_per_epoch, board)
        finally:
            if board is not None:
                board.close()


def finish_run(
    task: ClassificationTask, data: ClassificationData, state: TrainState, epochs_done: float,
    board: TensorBoardSink | None = None, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate the best weights on validation and test (when the splits hold one); write metrics
    (plus `extra`, e.g. a distillation's report), report, figures and the model card (rank 0); the
    confusion matrix and the resolved config also go to TensorBoard (`board`)."""
    cfg, model, env, run_dir, splits = task.cfg, task.model, task.env, task.run_dir, task.splits
    D.on_main(env, load_weights, model, run_dir / R.WEIGHTS_FILE)
    D.broadcast_module(model, env)  # the other ranks may not see rank 0's disk
    tc, device = cfg.train, env.device
    results: dict[str, Any] = {}
    if task.task_head.task != SINGLE_LABEL:
        return finish_task_run(task, data, state, epochs_done, board, extra)
    results["validation"], _ = evaluate(
        model, splits["validation"], data.labels, tc.eval_batch_size, device, task.pad_id, env=env, amp=task.amp
    )
    test = splits.get("test")
    if test is not None:
        results["test"], test_logits = evaluate(
            model, test, data.labels, tc.eval_batch_size, device, task.pad_id, env=env, amp=task.amp
        )
        predictions = test_logits.argmax(-1)
    metrics = {
        **results,
        "best_step": state.best_step,
        "best_metric": tc.best_metric,
        "steps": state.step,
        "epochs": epochs_done,
        "stopped": state.stopped,
        "train_seconds": state.seconds,
        "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "device": str(device),
        "precision": task.amp.name,
        "world_size": env.world_size,
        "labels": data.labels,
        "data": {
            "source": data.source,
            "carved_from_train": data.carved,
            **{f"{name}_examples": len(split) for name, split in splits.items()},
            "truncated": {name: split.num_truncated for name, split in splits.items()},
            "empty": {name: split.num_empty for name, split in splits.items()},
        },
        **(extra or {}),
    }
    if env.is_main:
        write_json(run_dir / R.METRICS_FILE, metrics)
        write_json(run_dir / R.HISTORY_FILE, state.history)
        if test is not None:
            write_text(run_dir / R.REPORT_FILE, report_text(test.labels, predictions, data.labels))
            plot_confusion_matrix(
                confusion(test.labels, predictions, len(data.labels)), data.labels, run_dir / R.CONFUSION_FILE
            )
        plot_training_curves(state.history, run_dir / R.CURVES_FILE, tc.best_metric)
        if board is not None:
            if test is not None:
                board.image_file("test/confusion_matrix", run_dir / R.CONFUSION_FILE, state.step)
            board.text("config", (run_dir / R.CONFIG_FILE).read_text(encoding="utf-8"), state.step)
        write_card(run_dir)
    tested = (f" | test accuracy {results['test']['accuracy']:.4f} macro-F1 {results['test']['macro_f1']:.4f}"
              if test is not None else " (test not scored)")
    logger.info(
        "best (step %d): validation accuracy %.4f macro-F1 %.4f%s -> %s",
        state.best_step, results["validation"]["accuracy"], results["validation"]["macro_f1"], tested, run_dir,
    )
    return metrics


def finish_task_run(
    task: ClassificationTask, data: ClassificationData, state: TrainState, epochs_done: float,
    board: TensorBoardSink | None = None, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """finish_run of a multi_label or regression run: thresholds tuned on validation with the best
    weights (thresholds.json), validation and test metrics, report and figures (rank 0)."""
    cfg, model, env, run_dir, splits, head = task.cfg, task.model, task.env, task.run_dir, task.splits, task.task_head
    tc = cfg.train
    results: dict[str, Any] = {}
    results["validation"], _ = evaluate(
        model, splits["validation"], data.labels, tc.eval_batch_size, env.device, task.pad_id, env=env, amp=task.amp,
        head=head, tune=True,
    )
    test = splits.get("test")
    if test is not None:
        results["test"], test_logits = evaluate(
            model, test, data.labels, tc.eval_batch_size, env.device, task.pad_id, env=env, amp=task.amp,
            head=head,
        )
    metrics = {
        **results, "task": head.task, "best_step": state.best_step, "best_metric": tc.best_metric, "steps": state.step,
        "epochs": epochs_done, "stopped": state.stopped, "train_seconds": state.seconds,
        "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
        "num_parameters": sum(p.numel() for p in model.parameters()), "device": str(env.device),
        "precision": task.amp.name, "world_size": env.world_size, "labels": data.labels,
        "data": {
            "source": data.source, "carved_from_train": data.carved,
            **{f"{name}_examples": len(split) for name, split in splits.items()},
            "truncated": {name: split.num_truncated for name, split in splits.items()},
            "empty": {name: split.num_empty for name, split in splits.items()},
            "pairs": splits["train"].token_type_ids is not None,
        },
        **(extra or {}),
    }
    if env.is_main:
        from tfm_cls.metrics import multi_label_report, regression_report
        from tfm_cls.plots import plot_per_label_f1, plot_regression_scatter

        write_json(run_dir / R.METRICS_FILE, metrics)
        write_json(run_dir / R.HISTORY_FILE, state.history)
        if head.task == MULTI_LABEL:
            write_json(run_dir / R.THRESHOLDS_FILE, dict(zip(data.labels, map(float, head.current_thresholds(len(data.labels))))))
        if test is not None and head.task == MULTI_LABEL:
            write_text(run_dir / R.REPORT_FILE, multi_label_report(test.labels, head.predict(test_logits), data.labels))
            plot_per_label_f1(results["test"]["per_label"], run_dir / R.PER_LABEL_F1_FILE)
        elif test is not None:
            write_text(run_dir / R.REPORT_FILE, regression_report(test.labels, head.scores(test_logits)))
            plot_regression_scatter(test.labels, head.scores(test_logits), run_dir / R.SCATTER_FILE, data.labels[0])
        plot_training_curves(state.history, run_dir / R.CURVES_FILE, tc.best_metric)
        if board is not None:
            board.text("config", (run_dir / R.CONFIG_FILE).read_text(encoding="utf-8"), state.step)
        write_card(run_dir)
    shown = results.get("test", results["validation"])
    summary = ", ".join(f"{k} {shown[k]:.4f}" for k in head.summary_keys)
    logger.info("best (step %d): %s %s -> %s", state.best_step, "test" if test is not None else "validation",
                summary, run_dir)
    return metrics

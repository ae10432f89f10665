"""The one training engine: the step loop every training job runs (classification, MLM, ...).

    engine = Engine(task, cfg.train, env, amp, run_dir)
    state = engine.fit(resume)          # steps -> evaluations -> checkpoints -> stop

The engine owns what every job shares: AdamW over `optim.param_groups`, the warmup + decay
schedule (stretched to a time budget), micro-batch accumulation, the DDP gradient sync, autocast
and loss scaling, the per-step exchange of clock and totals between ranks, logging and the
progress bar, evaluation and checkpoint cadence, keeping the best weights, early stopping and
resume. A `Task` supplies only what differs: its batches, how a batch becomes a loss, how to
evaluate and what to save (the shape of Lightning's `training_step` / `validation_step`, without
a callback machinery). This module holds the library's only `backward` call (Precision.backward).

A run is resumable at any optimizer step: the last checkpoint holds the model, optimizer, every
rank's RNG states, the loss scaler and `TrainState` (step, the sampler's epoch and position), and
a task's batch order is a pure function of (seed, epoch), so a resumed run ends with the same
weights as an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tfm_cls.config import TrainConfig
from tfm_cls.errors import TrainingDivergedError
from tfm_cls.runs import LAST_CHECKPOINT, LOG_FILE, log_to_file
from tfm_cls.training import distributed as D
from tfm_cls.training.best import is_better, unbeatable
from tfm_cls.training.checkpoint import resume_training_checkpoint, save_training_checkpoint
from tfm_cls.training.clock import WallClock
from tfm_cls.training.optim import affordable_total_steps, apply_lr, param_groups, set_body_trainable
from tfm_cls.training.precision import Precision

logger = logging.getLogger(__name__)

Batch = dict[str, Tensor]


class ScalarSink(Protocol):
    """Where the engine reports scalars besides the log (e.g. TensorBoard event files)."""

    def scalars(self, step: int, values: dict[str, float]) -> None:
        """`values` by tag (`train/loss`, `train/lr`, `train/tokens_per_second`, `validation/<metric>`)."""


class Task(Protocol):
    """What one kind of training job supplies to the engine."""

    name: str
    """Shown in log lines and the progress bar ("classification", "MLM")."""
    model: nn.Module
    """The module trained (the engine wraps it for DDP)."""
    best_metric: str | None
    """Validation metric whose best value selects the saved weights; None: the latest are saved."""
    has_validation: bool
    """False: the engine never evaluates and saves the final weights."""

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of `epoch` (example indices), in training order."""

    def batches(self, epoch: int, batches: list[list[int]]) -> Iterator[Batch]:
        """The collated CPU batches of `batches` (a tail of `epoch_batches(epoch)`), in order;
        each holds at least `attention_mask` [batch, seq]."""

    def units(self, batch: Batch) -> int:
        """How many items the batch's loss is a mean over (examples, target tokens): under DDP
        and accumulation every item of a step weighs the same."""

    def loss(self, model: nn.Module, batch: Batch) -> Tensor:
        """The batch's mean loss [] (called under autocast; `model` may be the DDP wrapper)."""

    def evaluate(self) -> dict[str, float]:
        """Validation metrics (a collective under DDP: every rank calls it)."""

    def save_best(self) -> None:
        """Write the weights the engine has just selected (rank 0 only)."""

    # optional: `starts_trained: bool`, whether the model is worth evaluating before the first step
    # (train.eval_at_start: auto); a task without it starts untrained

    def describe(self, metrics: dict[str, float]) -> str:
        """One log fragment for validation metrics, e.g. 'loss 0.41 accuracy 0.88'."""


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
    loss_sum: float = 0.0  # train loss since the last log line (sum of micro-batch means)
    loss_count: int = 0
    stopped: str = ""
    history: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=lambda: {"train": [], "eval": []})


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def start_process(tc: TrainConfig, seed: int, env: D.DistEnv) -> Precision:
    """Threads, seeds and the autocast policy of a job, before anything random is built."""
    if tc.num_threads:
        torch.set_num_threads(tc.num_threads)
    seed_everything(seed)
    return Precision(tc.precision, env.device)


@contextlib.contextmanager
def job(device: str, prepare_run_dir: Callable[[], Path]) -> Iterator[tuple[D.DistEnv, Path]]:
    """A training job's process: the DDP group (one process without torchrun), the run directory
    (checked and created by rank 0, `prepare_run_dir`), and its log file."""
    with D.process_group(device) as env:
        D.quiet_other_ranks(env)
        run_dir = D.on_main(env, prepare_run_dir)
        log_file = log_to_file(run_dir / LOG_FILE) if env.is_main else contextlib.nullcontext()
        with log_file, logging_redirect_tqdm():
            yield env, run_dir


def stop_reason(cfg: TrainConfig, step: int, seconds: float, planned_steps: int) -> str | None:
    """Why training stops after this step (planned steps reached, time budget used), or None."""
    if step >= planned_steps:
        return f"reached {planned_steps} steps"
    if cfg.max_minutes and seconds >= cfg.max_minutes * 60:
        return f"time budget of {cfg.max_minutes} minutes used"
    return None


@dataclasses.dataclass
class _Session:
    """One call of Engine.fit: when it started (time.perf_counter(), and the state's seconds then, so a resumed
    run's seconds go on counting), the steps the LR schedule spans (`total_steps`: the plan, shrunk to what the
    measured rate affords within train.max_minutes, `budget` seconds) and where that rate is measured from
    (seconds, step)."""

    started: float
    started_seconds: float
    total_steps: int
    rate_start: tuple[float, int]
    budget: float | None

    def seconds(self) -> float:
        """The run's training seconds now (this session's and those before a resume)."""
        return self.started_seconds + (time.perf_counter() - self.started)


class Engine:
    """Runs a Task's optimisation under one TrainConfig; `fit` returns the final TrainState."""

    def __init__(
        self, task: Task, cfg: TrainConfig, env: D.DistEnv, amp: Precision, run_dir: Path,
        sinks: list[ScalarSink] | None = None, clock: WallClock | None = None,
    ) -> None:
        """`clock`: the run's wall-clock budget (tfm_cls.training.clock); each evaluation tells it what
        a row costs, and the loop stops when the time left is what the end of the run needs."""
        self.task, self.cfg, self.env, self.amp = task, cfg, env, amp
        self.clock = clock
        self.sinks = sinks if env.is_main and sinks else []  # rank 0 reports for all
        self.checkpoint_path = run_dir / LAST_CHECKPOINT
        self.batches_per_epoch = len(task.epoch_batches(0))
        steps_per_epoch = -(-self.batches_per_epoch // cfg.grad_accum_steps)
        self.planned_steps = cfg.max_steps or cfg.epochs * steps_per_epoch

    # ---- pieces of the loop -----------------------------------------------------------------------

    def _require_finite(self, value: float, what: str) -> None:
        """Stop before anything is written when a loss the host already holds is NaN or infinite:
        last.ckpt and the best weights stay those of the last good state."""
        if not math.isfinite(value):
            kept = [p.name for p in (self.checkpoint_path, self.checkpoint_path.parent / "model.safetensors") if p.is_file()]
            raise TrainingDivergedError(
                f"training diverged at step {self.state.step}: the {what} is {value} (train.lr={self.cfg.lr}); "
                f"stopped without writing; kept {kept or 'no earlier checkpoint'} in {self.checkpoint_path.parent}. "
                "Lower train.lr (or set train.grad_clip) and train again with --overwrite"
            )

    def _checkpoint(self) -> None:  # a collective: every rank calls it
        self.state.loss_sum += self.pending_loss.take()
        self._require_finite(self.state.loss_sum, "train loss")
        # The update after the last loss may have made the weights NaN: the checkpoint copies them
        # to the host anyway, so this check costs no extra synchronisation worth counting.
        if not bool(torch.stack([torch.isfinite(p).all() for p in self.task.model.parameters()]).all()):
            self._require_finite(float("nan"), "model's weights (after the last update)")
        save_training_checkpoint(
            self.checkpoint_path, self.env, self.task.model, self.optimizer, self.amp, dataclasses.asdict(self.state)
        )

    def _evaluate(self) -> None:
        state, cfg, best_metric = self.state, self.cfg, self.task.best_metric
        started = time.perf_counter()
        metrics = self.task.evaluate()
        if self.clock is not None:
            # a task that scored a cheaper equal model says what a pass of its own model costs (`eval_cost`)
            cost = getattr(self.task, "eval_cost", None) or (time.perf_counter() - started,
                                                             int(getattr(self.task, "eval_rows", 0)))
            self.clock.measured(*cost)
        if "loss" in metrics:
            self._require_finite(metrics["loss"], "validation loss")
        state.last_eval_step = state.step
        state.history["eval"].append({"step": state.step, "epoch": state.epoch, **metrics})
        self._report(state.step, {f"validation/{k}": v for k, v in metrics.items()})
        value = metrics[best_metric] if best_metric else None
        if best_metric is None or is_better(best_metric, value, state.best_value):
            state.best_value, state.best_step, state.bad_evals = value, state.step, 0
            if self.env.is_main:
                self.task.save_best()
        else:
            state.bad_evals += 1
        best = f" (best {best_metric} {state.best_value:.4f} at step {state.best_step})" if best_metric else ""
        logger.info("step %d: validation %s%s", state.step, self.task.describe(metrics), best)
        if cfg.early_stopping_patience and state.bad_evals >= cfg.early_stopping_patience:
            state.stopped = f"early stopping: {state.bad_evals} evaluations without a better {best_metric}"
        elif best_metric and unbeatable(best_metric, state.best_value):  # the time left goes back to the user
            state.stopped = (f"early stopping: the best validation {best_metric} is {state.best_value:g} (step "
                             f"{state.best_step}), which no later evaluation can beat")

    def _evaluates_at_start(self) -> bool:
        if self.cfg.eval_at_start == "auto":
            return bool(getattr(self.task, "starts_trained", False))
        return bool(self.cfg.eval_at_start)

    def _report(self, step: int, values: dict[str, float]) -> None:
        for sink in self.sinks:
            sink.scalars(step, values)

    def _accumulate(self, train_model: nn.Module, micro_batches: list[Batch]) -> int:
        """Forward and backward of one optimizer step's micro-batches; returns their tokens."""
        env, n_micro = self.env, len(micro_batches)
        # Every item (example, target token) of the global step weighs the same: each rank's loss
        # is weighted by its share of the items of all ranks (DDP then averages over ranks, hence
        # the * world_size), each micro-batch by 1 / n_micro.
        local_units = [self.task.units(b) for b in micro_batches]
        global_units = D.all_reduce(local_units, env)
        step_tokens = 0
        for i, batch in enumerate(micro_batches):
            step_tokens += int(batch["attention_mask"].sum())  # still on the host: no device sync
            batch = {k: v.to(env.device, non_blocking=True) for k, v in batch.items()}
            share = local_units[i] / max(global_units[i], 1.0)
            with D.no_sync(train_model, skip=i < n_micro - 1):  # DDP all-reduces on the last micro-batch
                with self.amp.autocast():
                    loss = self.task.loss(train_model, batch)
                self.amp.backward(loss * (share * env.world_size / n_micro))
            self.pending_loss.add(loss * share)  # summed over ranks: the micro-batch's mean loss
        return step_tokens

    # ---- the loop -----------------------------------------------------------------------------------

    def fit(self, resume: bool = False) -> TrainState:
        """Train from the start (or, `resume`, from the last checkpoint) until a stop rule says so: planned
        steps, epochs, train.max_minutes, early stopping or the wall clock; returns the final TrainState."""
        train_model = self._start(resume)
        state, task, cfg = self.state, self.task, self.cfg
        if not resume and task.has_validation and self._evaluates_at_start():
            self._evaluate()  # step 0: the start is a candidate for the best weights too
        if self.clock is not None:  # no first step where the end of the run already needs what is left
            state.stopped = self.clock.stop_reason() or state.stopped
        task.model.train()
        session = _Session(started=time.perf_counter(), started_seconds=state.seconds, total_steps=self.planned_steps,
                           rate_start=(state.seconds, state.step),
                           budget=cfg.max_minutes * 60 if cfg.max_minutes else None)
        while not state.stopped and state.epoch < cfg.epochs and state.step < self.planned_steps:
            train_model = self._epoch(train_model, session)
        return self._end_fit()

    def _start(self, resume: bool) -> nn.Module:
        """The optimizer and the state (fresh, or the last checkpoint's), the body frozen while the head
        trains alone; returns the model the steps run (DDP-wrapped under torchrun)."""
        task, cfg, env, amp = self.task, self.cfg, self.env, self.amp
        model = task.model
        self.optimizer = optimizer = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr, betas=tuple(cfg.betas))
        self.state = state = TrainState()
        if resume:
            state = self.state = TrainState(
                **resume_training_checkpoint(self.checkpoint_path, env, model, optimizer, amp)
            )
            logger.info("resumed from step %d (epoch %d, batch %d)", state.step, state.epoch, state.position)
        logger.info(
            "%s: %d batches per epoch, %d optimizer steps planned, %d process(es) x batch %d x %d accumulated",
            task.name, self.batches_per_epoch, self.planned_steps, env.world_size, cfg.batch_size,
            cfg.grad_accum_steps,
        )
        set_body_trainable(model, state.step >= cfg.head_only_steps)
        train_model = D.wrap_model(model, env)  # after freezing: DDP synchronises what requires grad now
        self.pending_loss = D.DeviceSum(env.device)  # train loss not yet in state.loss_sum
        return train_model

    def _epoch(self, train_model: nn.Module, session: _Session) -> nn.Module:
        """The steps of the state's epoch from its position, each followed by its log line, evaluation,
        stop rules and checkpoint as the config says; an epoch run to its end is evaluated (without
        eval_every) and checkpointed. Returns the model the next step runs."""
        state, task, cfg, env = self.state, self.task, self.cfg, self.env
        batches = task.epoch_batches(state.epoch)
        loader = iter(task.batches(state.epoch, batches[state.position :]))
        bar = tqdm(
            total=len(batches), initial=state.position, desc=f"{task.name} epoch {state.epoch + 1}/{cfg.epochs}",
            disable=not cfg.progress or not env.is_main or not sys.stderr.isatty(), leave=False, dynamic_ncols=True,
        )
        window_start, window_tokens = time.perf_counter(), 0
        while state.position < len(batches) and not state.stopped:
            # One optimizer step: up to grad_accum_steps micro-batches (fewer at the epoch's end).
            n_micro = min(cfg.grad_accum_steps, len(batches) - state.position)
            step_started = session.seconds()
            train_model, step_tokens, lr = self._step(train_model, [next(loader) for _ in range(n_micro)], session)
            bar.update(n_micro)
            window_tokens += step_tokens
            if state.step % cfg.log_every == 0 or state.position >= len(batches):
                window_start, window_tokens = self._log_train(bar, lr, window_tokens, window_start), 0
            if task.has_validation and cfg.eval_every and state.step % cfg.eval_every == 0:
                self._evaluate()
            state.stopped = stop_reason(cfg, state.step, state.seconds, self.planned_steps) or state.stopped
            if self.clock is not None and not state.stopped:
                # every rank reads its own clock: under DDP they agree to within a step's collective;
                # the next step is taken only where one as long as this one still leaves the end its time
                state.stopped = self.clock.stop_reason(state.seconds - step_started)
            if state.position >= len(batches):
                break
            if (cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0) or state.last_eval_step == state.step:
                self._checkpoint()
        bar.close()
        del loader  # ends its worker processes before the next epoch starts new ones
        if state.position >= len(batches):  # epoch done
            state.epoch, state.position = state.epoch + 1, 0
            if task.has_validation and not cfg.eval_every and state.last_eval_step != state.step:
                self._evaluate()
            self._checkpoint()
        return train_model

    def _step(self, train_model: nn.Module, micro_batches: list[Batch],
              session: _Session) -> tuple[nn.Module, int, float]:
        """One optimizer step over `micro_batches`: forward and backward, the ranks' clocks and totals
        exchanged, the learning rate set and the update made, counted in the state (its step, position,
        tokens and seconds). Returns the model the next step runs (DDP takes the body on once it trains),
        the step's tokens (every rank's) and its learning rate."""
        state, cfg, env, model = self.state, self.cfg, self.env, self.task.model
        step_tokens = self._accumulate(train_model, micro_batches)
        seconds = session.seconds()
        if env.distributed:
            # One small collective per step gives every rank the same clock and totals, so
            # time-budget stops and learning rates cannot diverge between ranks.
            totals = D.gather_scalars([seconds, step_tokens, self.pending_loss.take()], env)  # [world, 3]
            seconds, step_tokens = float(totals[:, 0].max()), int(totals[:, 1].sum())
            state.loss_sum += float(totals[:, 2].sum())
        state.loss_count += len(micro_batches)
        state.tokens += step_tokens
        scale = apply_lr(self.optimizer, cfg, state.step, session.total_steps)
        self.amp.step(self.optimizer, model.parameters(), cfg.grad_clip)
        state.step += 1
        state.position += len(micro_batches)
        if state.step == cfg.head_only_steps:
            set_body_trainable(model, True)
            train_model = D.wrap_model(model, env)  # DDP takes the newly trainable parameters on
        state.seconds = seconds
        if session.budget is not None:
            session.total_steps = affordable_total_steps(state.step, state.seconds, session.rate_start,
                                                         session.budget, self.planned_steps)
        return train_model, step_tokens, cfg.lr * scale

    def _log_train(self, bar: tqdm, lr: float, window_tokens: int, window_start: float) -> float:
        """Log the mean train loss since the last log line (history, sinks, bar or log); returns now."""
        state, task = self.state, self.task
        state.loss_sum += self.pending_loss.take()
        now = time.perf_counter()
        tokens_per_s = window_tokens / max(now - window_start, 1e-9)
        mean_loss = state.loss_sum / max(state.loss_count, 1)
        self._require_finite(mean_loss, "train loss")
        state.history["train"].append({"step": state.step, "loss": mean_loss, "lr": lr})
        self._report(state.step, {"train/loss": mean_loss, "train/lr": lr, "train/tokens_per_second": tokens_per_s})
        bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
        # Without a bar (stderr not a terminal, or progress off) the log line says it.
        logger.log(logging.DEBUG if not bar.disable else logging.INFO,
                   "step %d %s loss %.4f lr %.3e tokens/s %.0f", state.step, task.name, mean_loss, lr, tokens_per_s)
        state.loss_sum, state.loss_count = 0.0, 0
        return now

    def _end_fit(self) -> TrainState:
        """The last evaluation (or, without validation, the weights), the last checkpoint, the stop reason."""
        state, task, cfg = self.state, self.task, self.cfg
        state.stopped = state.stopped or f"completed {cfg.epochs} epochs"
        if task.has_validation:
            if state.last_eval_step != state.step or state.best_step < 0:
                self._evaluate()
        elif self.env.is_main:
            task.save_best()
        if state.best_step == 0 and state.step > 0:
            logger.warning("no evaluation after step 0 beat the start (%s %.4f): the weights kept are those the run "
                           "started from; training did not help (a lower train.lr, or fewer steps, may)",
                           task.best_metric, state.best_value)
        self._checkpoint()
        # Release DDP's reducer (it holds the process group, which teardown destroys) and the optimizer state.
        self.optimizer = None
        logger.info("%s training stopped (%s) after %d steps, %.1f s", task.name, state.stopped, state.step, state.seconds)
        return state

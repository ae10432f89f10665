"""The end of a classification run: the best weights scored, and the run directory's results.

    finish_run(task, data, state, epochs_done)  ->  metrics.json, history.json, report.txt,
                                                   figures, README.md (the model card)

The best weights (model.safetensors) are evaluated on validation (where, for single-label runs,
`train.calibration` fits the temperature of calibrated scores: calibration.json, tfm_cls.classify.calibration)
and, where the data hold a test split, on test; the report, the confusion matrix (single_label), the per-label F1 (multi_label)
or the scatter (regression) are of the test split and are not written without one (a tuning
trial, a TextClassifier fit): metrics.json then holds validation only. `tfm-cls train`
(tfm_cls.train) and `tfm-cls distill` (tfm_cls.distill.recipe) both end here; under DDP every rank
evaluates its share and rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np

from tfm_cls import runs as R
from tfm_cls.bag.candidates import Choice, choose, save_candidates, score_test, trained_weights
from tfm_cls.classify.calibration import (
    ECE_BINS,
    SHIFT_Z,
    accuracy_shift,
    calibration_summary,
    fit_temperature,
)
from tfm_cls.classify.card import write_card
from tfm_cls.classify.plots import plot_training_curves
from tfm_cls.classify.predict import evaluate
from tfm_cls.classify.task import ClassificationTask
from tfm_cls.data.sources import ClassificationData
from tfm_cls.io import write_json
from tfm_cls.training import budget
from tfm_cls.training import distributed as D
from tfm_cls.training.clock import WallClock
from tfm_cls.training.engine import TrainState
from tfm_cls.training.tensorboard import TensorBoardSink
from tfm_cls.weights import load_weights

logger = logging.getLogger(__name__)


def calibrate(head: Any, logits: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """Fit the head's temperature on validation logits [N, C] and class ids [N] (the head's
    `temperature` is set); what calibration.json and metrics.json record of it."""
    temperature = fit_temperature(logits, targets)
    head.temperature = temperature
    summary = {"method": "temperature", "temperature": temperature, "fitted_on": "validation",
               "ece_bins": ECE_BINS, "validation": calibration_summary(logits, targets, temperature)}
    v = summary["validation"]
    logger.info("calibration: temperature %.4f (validation NLL %.4f -> %.4f, ECE %.4f -> %.4f)",
                temperature, v["nll_before"], v["nll_after"], v["ece_before"], v["ece_after"])
    return summary


def check_shift(validation: dict[str, Any], test: dict[str, Any], calibration: dict[str, Any]) -> float | None:
    """Test accuracy minus validation accuracy in standard errors (None without accuracies); a
    warning where they are SHIFT_Z or more apart: validation, where T was fitted, then does not
    represent test, and the temperature may not carry to it."""
    if "accuracy" not in validation or "accuracy" not in test:
        return None
    z = accuracy_shift(validation["accuracy"], validation["examples"], test["accuracy"], test["examples"])
    if abs(z) >= SHIFT_Z:
        t = calibration["test"]
        logger.warning(
            "calibration: validation accuracy %.4f (%d texts) and test accuracy %.4f (%d texts) are %.1f standard "
            "errors apart: the temperature fitted on validation may not carry to test (test ECE %.4f -> %.4f)",
            validation["accuracy"], validation["examples"], test["accuracy"], test["examples"], abs(z),
            t["ece_before"], t["ece_after"])
    return z


def score_splits(task: ClassificationTask, labels: list[str], scored: dict[str, Any] | None = None,
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray], Any]:
    """The best weights' metrics and logits on validation and test (those the run holds), and the
    calibration fitted on validation before test is scored (None where there is none). `scored`:
    {split: (metrics, logits)} already computed with the task's head (the choice's validation)."""
    cfg, model, env, splits, head = task.cfg, task.model, task.env, task.splits, task.task_head
    tc = cfg.train
    results: dict[str, Any] = {}
    logits: dict[str, np.ndarray] = {}

    def score(name: str) -> None:
        if scored and name in scored:
            results[name], logits[name] = scored[name]
            return
        results[name], logits[name] = evaluate(
            model, splits[name], labels, tc.eval_batch_size, env.device, task.pad_id, env=env, amp=task.amp,
            head=head, tune=name == "validation",  # the head tunes its decision rule on validation
        )

    if "validation" in splits:
        score("validation")
    calibration = None
    if tc.calibration != "none" and head.calibratable and "validation" in splits:
        calibration = calibrate(head, logits["validation"], splits["validation"].labels)  # before test is scored
        # The validation loss of the scores users see (the metrics are those of an argmax: unchanged).
        results["validation"]["loss"] = head.metrics(logits["validation"], splits["validation"].labels, labels)["loss"]
    if "test" in splits:
        score("test")
        if calibration is not None:
            calibration["test"] = calibration_summary(logits["test"], splits["test"].labels, head.temperature)
            calibration["test"]["accuracy_shift"] = check_shift(results["validation"], results["test"], calibration)
    return results, logits, calibration


def classical_baseline(data: ClassificationData, task: str, results: dict[str, Any], tc: Any,
                       clock: WallClock | None = None) -> dict[str, Any] | None:
    """The classical baseline (tfm_cls.classify.baseline.score_beside) fitted on the run's training
    split and scored on its validation and test, a reference beside what the run ships; a warning
    where it beats the shipped model on validation. None without a validation split, or where the
    wall clock leaves no time for it. Under a budget it is first fitted on BASELINE_PROBE training
    texts (tfm_cls.training.budget), timed, and fitted on all of them only where the time left affords
    the measured cost scaled up (else the probe's result stands, `shrunk` says so)."""
    if "validation" not in data.splits:
        logger.info("baseline: not fitted (no validation split to pick its regularisation on)")
        return None
    from tfm_cls.classify.baseline import Split, run_baseline_name, score_beside

    def split_of(name: str, rows_taken: int | None = None) -> Split:
        rows = data.splits[name]
        if rows_taken is not None:
            rows = rows.shuffle(seed=0).select(range(rows_taken))
        columns = rows.with_format("arrow")  # each column read as one list, not a row at a time
        pairs = columns["text_pair"].to_pylist() if "text_pair" in rows.column_names else None
        return Split(texts=columns["text"].to_pylist(), targets=np.asarray(columns["label"].to_pylist()), pairs=pairs)

    n = len(data.splits["train"])
    # the whole set's model, the probe's too: its time is what the whole fit is judged by (tnews: the probe's
    # 2,000 texts named logistic regression, ~193 s for 48k texts; the whole set's LinearSVC takes seconds)
    name = run_baseline_name(task, "text_pair" in data.splits["train"].column_names, n)
    if clock is not None and clock.budget is not None and n > budget.BASELINE_PROBE:
        scored = _baseline_in_budget(lambda rows: score_beside(
            task, {split: split_of(split, rows if split == "train" and rows < n else None) for split in data.splits},
            name), n, clock)
        if scored is None:
            return None
    else:
        scored = score_beside(task, {split: split_of(split) for split in data.splits}, name)
    metric = tc.best_metric if tc.best_metric in scored["validation"] else next(iter(scored["validation"]))
    ours, theirs = results["validation"][metric], scored["validation"][metric]
    scored["beats_model"] = bool(theirs < ours if metric in ("loss", "mse") else theirs > ours)
    logger.log(logging.WARNING if scored["beats_model"] else logging.INFO,
               "baseline %s: validation %s %.4f, the model's %.4f%s", scored["model"], metric, theirs, ours,
               " -- the scikit-learn baseline beats the shipped model on validation (its in-graph counterpart is the "
               "bag_of_terms candidate, where the run made one)"
               if scored["beats_model"] else "")
    return scored


def _baseline_in_budget(fit: Any, n: int, clock: WallClock) -> dict[str, Any] | None:
    """The baseline fitted (`fit(rows)` -> its scores) on BASELINE_PROBE training texts, then on BASELINE_GROWTH
    times as many, up to all `n`, while the time left, and the baseline's BASELINE_SHARE of the budget, afford
    the last fit's time scaled by the texts (with BASELINE_MARGIN: tfm_cls.training.budget.next_baseline_fit);
    the largest fitted stands, `shrunk` saying where it stopped. None where there is no time for the probe."""
    if not clock.affords_before_writing(budget.BASELINE_MIN_SECONDS):
        clock.shrink(f"no classical baseline ({max(clock.left(), 0):.0f} s left)")
        return None
    rows, scored, first = budget.BASELINE_PROBE, None, time.monotonic()
    share = clock.share(budget.BASELINE_SHARE)
    while True:
        started = time.monotonic()
        scored = fit(rows)
        took = time.monotonic() - started
        if rows >= n:
            return scored
        following, needed = budget.next_baseline_fit(rows, took, n)
        spent = time.monotonic() - first
        # the baseline is the last scoring (then only files are written), and a reference: its share at most
        if not clock.affords_before_writing(needed) or spent + needed > share:
            scored["shrunk"] = (f"baseline fitted on {rows} of {n} training texts ({following} were measured to need "
                                f"~{needed:.0f} s; {max(clock.left(), 0):.0f} s were left, the baseline's share "
                                f"{share:.0f} s, {spent:.0f} s spent)")
            logger.warning("wall-clock budget: %s", scored["shrunk"])
            return scored
        logger.info("baseline: %d training texts fitted in %.1f s; now %d", rows, took, following)
        rows = following


@dataclasses.dataclass
class Scored:
    """What the end of a run scored (`score_run`): the choice among the run's candidates (None: nothing to
    choose, or DDP), the shipped model's metrics and logits by split, its calibration (None: none fitted),
    and what the budget cut short, in the order it happened (metrics.json `wall_clock.shrunk`)."""

    choice: Choice | None
    results: dict[str, Any]
    logits: dict[str, np.ndarray]
    calibration: dict[str, Any] | None
    shrunk: list[str]


def finish_run(
    task: ClassificationTask, data: ClassificationData, state: TrainState, epochs_done: float,
    board: TensorBoardSink | None = None, extra: dict[str, Any] | None = None, clock: WallClock | None = None,
) -> dict[str, Any]:
    """Evaluate the best weights on validation (where the head tunes its decision rule, e.g. the
    multi-label thresholds) and test (when the splits hold one); write metrics (plus `extra`, e.g.
    a distillation's report), the head's decision file, report and figure, the training curves and
    the model card (rank 0); the test figure and the resolved config also go to TensorBoard."""
    env, run_dir = task.env, task.run_dir
    D.on_main(env, load_weights, task.model, trained_weights(run_dir))
    D.broadcast_module(task.model, env)  # the other ranks may not see rank 0's disk
    scored = score_run(task, data, clock)
    baseline = _baseline(task, data, scored, clock)
    metrics = run_metrics(task, data, state, epochs_done, scored, baseline, clock, extra)
    if env.is_main:
        write_run(task, data, state, scored, metrics, board)
    _log_best(task, state, scored.results)
    return metrics


def score_run(task: ClassificationTask, data: ClassificationData, clock: WallClock | None = None) -> Scored:
    """The run's choice (tfm_cls.bag.candidates) and the chosen model's scores: validation (the
    choice's, reused), calibration, test, then the candidates not chosen on test where the clock affords it."""
    env = task.env
    # the deployables the run made, scored on validation: the cheapest that holds the best score
    # becomes the task's model and head (tfm_cls.bag.candidates; one process: DDP keeps its model)
    choice = choose(task, clock) if not env.distributed else None
    cached = {"validation": (choice.chosen.validation, choice.chosen.logits)} if choice else None
    results, logits, calibration = score_splits(task, data.labels, cached)
    shrunk: list[str] = list(clock.shrunk) if clock is not None else []  # what the budget cut short (metrics.json)
    if choice is not None:
        shrunk += score_test(choice, task, results.get("test"), clock)
    return Scored(choice, results, logits, calibration, shrunk)


def _baseline(task: ClassificationTask, data: ClassificationData, scored: Scored,
              clock: WallClock | None) -> dict[str, Any] | None:
    """The classical baseline beside the shipped model where `train.baseline` asks for it (rank 0;
    `classical_baseline`); where the budget fitted it on a sample, that is said in `scored.shrunk`."""
    tc = task.cfg.train
    if not tc.baseline:
        return None
    baseline = D.on_main(task.env, classical_baseline, data, task.task_head.task, scored.results, tc, clock)
    if baseline is not None and baseline.get("shrunk"):
        scored.shrunk.append(baseline["shrunk"])
    return baseline


def run_metrics(task: ClassificationTask, data: ClassificationData, state: TrainState, epochs_done: float,
                scored: Scored, baseline: dict[str, Any] | None, clock: WallClock | None,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contents of metrics.json: the scores, the loop's record, the data, calibration, baseline, the
    choice's front and the wall clock's, plus `extra`."""
    cfg, model, head, env, splits = task.cfg, task.model, task.task_head, task.env, task.splits
    tc, results, choice = cfg.train, scored.results, scored.choice
    calibration = scored.calibration
    return {
        **results,
        **({"task": head.task} if head.records_task else {}),
        "best_step": state.best_step,
        "best_metric": tc.best_metric,
        "steps": state.step,
        "epochs": epochs_done,
        "stopped": state.stopped,
        "train_seconds": state.seconds,
        "train_tokens_per_second": state.tokens / max(state.seconds, 1e-9),
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "device": str(env.device),
        "precision": task.amp.name,
        "world_size": env.world_size,
        "labels": data.labels,
        **head.weights_record(data.labels),  # train.class_weight / multi_label.pos_weight, as trained
        "data": {
            "source": data.source,
            "carved_from_train": data.carved,
            **{f"{name}_examples": len(split) for name, split in splits.items()},
            "truncated": {name: split.num_truncated for name, split in splits.items()},
            "empty": {name: split.num_empty for name, split in splits.items()},
            **({"pairs": splits["train"].token_type_ids is not None} if head.records_task else {}),
        },
        **({"calibration": calibration} if calibration is not None else {}),
        **({"baseline": baseline} if baseline is not None else {}),
        **({"candidates": {"rule": choice.rule, "chosen": choice.chosen.name, "front": choice.front}}
           if choice is not None else {}),
        **({"wall_clock": {"budget_seconds": clock.budget, "seconds_at_scoring": clock.elapsed(),
                           "shrunk": scored.shrunk}}
           if clock is not None and clock.budget is not None else {}),
        **(extra or {}),
    }


def write_run(task: ClassificationTask, data: ClassificationData, state: TrainState, scored: Scored,
              metrics: dict[str, Any], board: TensorBoardSink | None = None) -> None:
    """The run directory's results (rank 0): the candidates, calibration.json, metrics.json, history.json,
    the head's decision file, the test report and figure, the training curves and the model card; the
    test figure and the resolved config also go to TensorBoard."""
    run_dir, head, tc = task.run_dir, task.task_head, task.cfg.train
    test = task.splits.get("test")
    if scored.choice is not None:
        save_candidates(run_dir, scored.choice, data.labels)
    if scored.calibration is not None:
        write_json(run_dir / R.CALIBRATION_FILE, scored.calibration)
    write_json(run_dir / R.METRICS_FILE, metrics)
    write_json(run_dir / R.HISTORY_FILE, state.history)
    head.save_decision(run_dir, data.labels)
    figure = None
    if test is not None:
        figure = head.write_test_results(run_dir, test.labels, scored.logits.get("test"), scored.results["test"],
                                         data.labels)
    plot_training_curves(state.history, run_dir / R.CURVES_FILE, tc.best_metric)
    if board is not None:
        if figure is not None:
            board.image_file(f"test/{figure.stem}", figure, state.step)
        board.text("config", (run_dir / R.CONFIG_FILE).read_text(encoding="utf-8"), state.step)
    write_card(run_dir)


def _log_best(task: ClassificationTask, state: TrainState, results: dict[str, Any]) -> None:
    """The run's last line: the best step's validation and test scores and where the run was written."""
    head = task.task_head

    def summary(split: str) -> str:
        if split not in results:
            return f"{split} not scored (no {split} split)"
        return f"{split} " + ", ".join(f"{k} {results[split][k]:.4f}" for k in head.summary_keys)

    logger.info("best (step %d): %s | %s -> %s", state.best_step, summary("validation"), summary("test"), task.run_dir)

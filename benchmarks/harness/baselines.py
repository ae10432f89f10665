"""The classical baselines as benchmark rows: the library's one implementation
(tfm_cls.classify.baseline: TF-IDF features, a model per grid value, the best on validation),
timed, its test metrics computed with the library's metric functions; `tfidf_row`: every baseline
of a task picked on validation, a hold-out or by cross-validation (benchmarks.recipe,
benchmarks.selection)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.harness.cpu import CpuClock
from benchmarks.harness.samples import Columns
from tfm_cls.classify.baseline import (
    SYSTEMS,
    SelectedBaseline,
    Split,
    baseline_names,
    pair_features,
    split_metrics,
)

__all__ = ["SYSTEMS", "TASK_METRIC", "baseline_names", "baseline_row", "classical_names", "cross_validated", "holdout",
           "tfidf_baseline", "tfidf_row"]

TASK_METRIC = {"single_label": "accuracy", "multi_label": "micro_f1", "regression": "pearson"}
CV_FOLDS = 5
CV_MAX_TRAIN = 2000
"""TF-IDF without a validation split: cross-validated up to this many training texts, else a 10 %
hold-out of train picks the grid value (with a validation split: that split)."""
HOLDOUT = 0.1


def baseline_row(name: str, train: Split, validation: Split | None, test: Split,
                 tokenizer: Callable[[str], list[str]] | None = None,
                 system: str | None = None, predictions: bool = False) -> tuple[dict[str, Any], SelectedBaseline]:
    """Fit baseline `name` (its grid value picked on `validation`) and score it on `test`: the
    row (the task's test metrics; `metric_name` / `metric`: the picking metric on test,
    `validation_metric` on validation; train_minutes: fitting and picking; predict_texts_per_s:
    features and decisions from raw test texts) and the fitted baseline. `system` names the row
    (default `name`); `predictions` (single-label): the test decisions too, `test_predicted`."""
    fitted = SelectedBaseline(name, tokenizer).fit(train, validation)
    start = time.perf_counter()
    predicted = fitted.predict(test.texts, test.pairs)
    seconds = time.perf_counter() - start
    spec = SYSTEMS[name]
    metrics = split_metrics(spec.task, test.targets, predicted)
    row = {"system": system or name, **metrics, "metric_name": spec.metric, "metric": metrics[spec.metric],
           "validation_metric": fitted.validation_score_, "train_minutes": fitted.fit_seconds_ / 60,
           "predict_texts_per_s": len(test.texts) / max(seconds, 1e-9), spec.param: fitted.param_}
    if predictions and spec.task == "single_label":
        row["test_predicted"] = np.asarray(predicted).astype(int).tolist()
    return row, fitted


def _take(items: list[str] | None, rows: np.ndarray) -> list[str] | None:
    return None if items is None else [items[i] for i in rows]


def _subset(split: Split, rows: np.ndarray) -> Split:
    return Split(_take(split.texts, rows), split.targets[rows], _take(split.pairs, rows))


def _decide(task: str, scores: np.ndarray, thresholds: np.ndarray | None) -> np.ndarray:
    """A baseline's outputs -> decisions (multi-label: each label's threshold, at least one label, as
    SelectedBaseline and our runtime head decide)."""
    if task != "multi_label":
        return scores
    from tfm_cls.runtime.heads import MultiLabel

    return MultiLabel(thresholds=thresholds).predicted(scores)


def _folds(task: str, targets: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded k-fold (train rows, held rows): stratified for single-label where every class has
    `folds` examples, plain otherwise."""
    from sklearn.model_selection import KFold, StratifiedKFold

    n = len(targets)
    if task == "single_label" and np.bincount(targets)[np.bincount(targets) > 0].min() >= folds:
        return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(n), targets))
    return list(KFold(folds, shuffle=True, random_state=seed).split(np.zeros(n)))


def cross_validated(name: str, train: Split, folds: int = CV_FOLDS, seed: int = 0) -> dict[str, Any]:
    """Baseline `name` with its grid value picked by k-fold cross-validation on `train`: for each
    value, every training text scored by the fold model that did not see it (multi-label: each
    label's threshold tuned on those scores); the best value refitted on all of `train`. Returns
    {"param", "cv_score", "model" (vectorizer, fitted model), "thresholds"}."""
    system = SYSTEMS[name]
    splits = _folds(system.task, train.targets, folds, seed)
    best = None
    for param in system.grid:
        scores = None
        for fit_rows, held in splits:
            part, out = _subset(train, fit_rows), _subset(train, held)
            vectorizer = system.features()
            model = system.model(param).fit(pair_features(vectorizer, part.texts, part.pairs, fit=True), part.targets)
            held_scores = np.asarray(getattr(model, system.scores)(pair_features(vectorizer, out.texts, out.pairs)))
            if scores is None:
                scores = np.zeros((len(train.texts), *held_scores.shape[1:]), dtype=held_scores.dtype)
            scores[held] = held_scores
        thresholds = None
        if system.task == "multi_label":
            from tfm_cls.classify.heads import tune_thresholds

            thresholds = tune_thresholds(scores, train.targets, "per_label", fixed=system.default_threshold)
        score = split_metrics(system.task, train.targets, _decide(system.task, scores, thresholds))[system.metric]
        if best is None or score > best[0]:
            best = (score, param, thresholds)
    score, param, thresholds = best
    vectorizer = system.features()
    model = system.model(param).fit(pair_features(vectorizer, train.texts, train.pairs, fit=True), train.targets)
    return {"param": param, "cv_score": score, "model": (vectorizer, model), "thresholds": thresholds}


def classical_names(task: str, pairs: bool) -> list[str]:
    """The TF-IDF baselines of a task: the library's, plus one-vs-rest LinearSVC (picked by
    micro-F1, the table's metric) for multi-label."""
    names = baseline_names(task, pairs)
    return names + ["tfidf-ovr-svm"] if task == "multi_label" and "tfidf-ovr-svm" not in names else names


def holdout(train: Split, task: str, seed: int, fraction: float = HOLDOUT) -> tuple[Split, Split]:
    """A seeded (stratified for single-label) `fraction` of train held out as validation."""
    from sklearn.model_selection import train_test_split

    rows = np.arange(len(train.texts))
    keep, held = train_test_split(rows, test_size=fraction, random_state=seed,
                                  stratify=train.targets if task == "single_label" else None)
    return _subset(train, np.sort(keep)), _subset(train, np.sort(held))


def tfidf_baseline(name: str, splits: dict[str, Split], seed: int = 0, predictions: bool = False) -> dict[str, Any]:
    """One TF-IDF baseline's test metrics, picked on validation, by cross-validation, or on a
    hold-out (module docstring); `cpu_minutes`: this process's CPU time for fitting, picking and
    scoring. `predictions`: single-label, each test text's predicted class id too (`test_predicted`),
    for a paired comparison with another system on the same texts."""
    system = SYSTEMS[name]
    train, test = splits["train"], splits["test"]
    clock = CpuClock()
    if "validation" in splits or len(train.texts) > CV_MAX_TRAIN:
        if "validation" in splits:
            fit_on, validation, selected_by = train, splits["validation"], "validation"
        else:
            fit_on, validation = holdout(train, system.task, seed)
            selected_by = f"{HOLDOUT:.0%} of train held out"
        row, _ = baseline_row(name, fit_on, validation, test, predictions=predictions)
        row.update(selected_by=selected_by, cpu_minutes=clock.minutes)
        return row
    picked = cross_validated(name, train, seed=seed)
    vectorizer, model = picked["model"]
    scores = getattr(model, system.scores)(pair_features(vectorizer, test.texts, test.pairs))
    decided = _decide(system.task, scores, picked["thresholds"])
    metrics = split_metrics(system.task, test.targets, decided)
    return {"system": name, **metrics, "metric_name": system.metric, "metric": metrics[system.metric],
            "validation_metric": picked["cv_score"], system.param: picked["param"],
            "selected_by": f"{CV_FOLDS}-fold cross-validation on train", "cpu_minutes": clock.minutes,
            **({"test_predicted": np.asarray(decided).astype(int).tolist()}
               if predictions and system.task == "single_label" else {})}


def tfidf_row(splits: dict[str, Split], columns: Columns, metric_name: str, seed: int = 0,
              predictions: bool = False) -> dict[str, Any]:
    """Every classical baseline of the task; `metric`: the best of them on this sample's test
    (`predictions`: tfidf_baseline's)."""
    baselines = {name: tfidf_baseline(name, splits, seed, predictions)
                 for name in classical_names(columns.task, columns.pair is not None)}
    best = max(baselines, key=lambda n: baselines[n][metric_name])
    return {"metric_name": metric_name, "metric": baselines[best][metric_name], "best": best,
            "cpu_minutes": sum(b["cpu_minutes"] for b in baselines.values()), "baselines": baselines}

"""TF-IDF baselines (scikit-learn) for the accuracy benchmark, fit on exactly our splits.

    tfidf-word-lr     word 1-2-grams + LogisticRegression
    tfidf-char-svm    word 1-2 + char 2-5-grams + LinearSVC
The words are tfm_cls.classify.baseline.tfidf_vectorizer's: scikit-learn's, with each CJK
character a word of its own, so Chinese needs no switch (the char 1-3-gram features it replaced
measured no better on tnews: docs/training.md).
The
regularisation C is picked on the validation split (as our model picks its best checkpoint there).

Task-aware baselines (`run_task_baseline`, data.task / sentence pairs; docs/tasks.md):
    tfidf-ovr-lr      multi-label: one-vs-rest LogisticRegression on the word 1-2-gram TF-IDF, each
                      label's threshold tuned on validation as ours is (tfm_cls.classify.heads.best_threshold)
    tfidf-pair-lr     pairs, classes: TF-IDF of each side, plus |a - b| and a * b, LogisticRegression
    tfidf-pair-ridge  pairs, a score: the same features, Ridge regression
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.svm import LinearSVC

from tfm_cls.classify.baseline import tfidf_vectorizer


def _word_lr(c: float) -> Pipeline:
    return Pipeline([("tfidf", tfidf_vectorizer(min_df=1)), ("clf", LogisticRegression(C=c, max_iter=3000))])


def _char_svm(c: float) -> Pipeline:
    features = FeatureUnion([
        ("word", tfidf_vectorizer()),
        ("char", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2)),
    ])
    return Pipeline([("tfidf", features), ("clf", LinearSVC(C=c))])


# name -> (pipeline factory (C), the C values tried)
BASELINES: dict[str, tuple[Callable[[float], Pipeline], tuple[float, ...]]] = {
    "tfidf-word-lr": (_word_lr, (1.0, 4.0, 16.0)),
    "tfidf-char-svm": (_char_svm, (0.1, 0.5, 2.0)),
}


@dataclasses.dataclass
class Split:
    texts: list[str]
    labels: np.ndarray
    """single-label ids [N]; multi-label multi-hot [N, C]; regression values [N]."""
    pairs: list[str] | None = None
    """Sentence pairs: the second texts."""


def splits_of(datasets_by_name) -> dict[str, Split]:
    """Split views of a ClassificationData's splits (`text`, `label`, and `text_pair` for pairs)."""
    return {
        name: Split(list(ds["text"]), np.asarray(ds["label"]),
                    list(ds["text_pair"]) if "text_pair" in ds.column_names else None)
        for name, ds in datasets_by_name.items()
    }


def run_baseline(name: str, train: Split, validation: Split, test: Split) -> dict:
    """Fit `name` for each C on train, keep the best on validation, report it on test."""
    factory, grid = BASELINES[name]
    best = None
    start = time.perf_counter()
    for c in grid:
        model = factory(c).fit(train.texts, train.labels)
        val_acc = accuracy_score(validation.labels, model.predict(validation.texts))
        if best is None or val_acc > best[0]:
            best = (val_acc, c, model)
    fit_minutes = (time.perf_counter() - start) / 60
    val_acc, c, model = best
    start = time.perf_counter()
    predicted = model.predict(test.texts)
    predict_seconds = time.perf_counter() - start
    return {
        "system": name,
        "accuracy": float(accuracy_score(test.labels, predicted)),
        "macro_f1": float(f1_score(test.labels, predicted, average="macro")),
        "validation_accuracy": float(val_acc),
        "train_minutes": fit_minutes,
        "predict_texts_per_s": len(test.texts) / max(predict_seconds, 1e-9),
        "C": c,
    }


# ---- task-aware baselines ------------------------------------------------------------------------


def _pair_features(vec: TfidfVectorizer, split: Split):
    """[a, b, |a - b|, a * b] of the two sides' TF-IDF vectors (sparse)."""
    from scipy import sparse

    a, b = vec.transform(split.texts), vec.transform(split.pairs)
    return sparse.hstack([a, b, abs(a - b), a.multiply(b)]).tocsr()


def task_baseline_names(task: str, pairs: bool) -> list[str]:
    if task == "multi_label":
        return ["tfidf-ovr-lr"]
    if task == "regression":
        return ["tfidf-pair-ridge"] if pairs else ["tfidf-ridge"]
    return ["tfidf-pair-lr"] if pairs else list(BASELINES)


def run_task_baseline(name: str, train: Split, validation: Split, test: Split) -> dict:
    """Fit a task-aware baseline; C / alpha picked on validation by the task's metric; test metrics
    computed with tfm_cls.classify.metrics (the same functions as ours)."""
    from sklearn.linear_model import Ridge
    from sklearn.multiclass import OneVsRestClassifier

    from tfm_cls.classify.heads import tune_thresholds
    from tfm_cls.classify.metrics import classification_metrics, multi_label_metrics, regression_metrics
    from tfm_cls.runtime.heads import MultiLabel

    if name in BASELINES:
        return run_baseline(name, train, validation, test)
    start = time.perf_counter()
    vec = tfidf_vectorizer(min_df=1)
    if train.pairs is not None:
        vec.fit(train.texts + train.pairs)
        features = {k: _pair_features(vec, s) for k, s in (("train", train), ("validation", validation))}
        transform = lambda split: _pair_features(vec, split)  # noqa: E731
    else:
        vec.fit(train.texts)
        features = {k: vec.transform(s.texts) for k, s in (("train", train), ("validation", validation))}
        transform = lambda split: vec.transform(split.texts)  # noqa: E731
    best = None
    if name == "tfidf-ovr-lr":
        names = [str(i) for i in range(train.labels.shape[1])]
        for c in (1.0, 4.0, 16.0):
            model = OneVsRestClassifier(LogisticRegression(C=c, max_iter=2000), n_jobs=1).fit(features["train"], train.labels)
            probs = model.predict_proba(features["validation"])
            thresholds = tune_thresholds(probs, validation.labels, "per_label")
            score = multi_label_metrics(validation.labels, MultiLabel(thresholds=thresholds).predicted(probs), names)["macro_f1"]
            if best is None or score > best[0]:
                best = (score, c, model, thresholds)
        fit_minutes = (time.perf_counter() - start) / 60
        score, c, model, thresholds = best
        t0 = time.perf_counter()
        pred = MultiLabel(thresholds=thresholds).predicted(model.predict_proba(transform(test)))
        m = multi_label_metrics(test.labels, pred, names)
        out = {"macro_f1": m["macro_f1"], "micro_f1": m["micro_f1"], "subset_accuracy": m["subset_accuracy"],
               "metric_name": "macro_f1", "metric": m["macro_f1"]}
    elif name in ("tfidf-pair-ridge", "tfidf-ridge"):
        for alpha in (0.3, 1.0, 3.0, 10.0):
            model = Ridge(alpha=alpha).fit(features["train"], train.labels)
            score = regression_metrics(validation.labels, model.predict(features["validation"]))["pearson"]
            if best is None or score > best[0]:
                best = (score, alpha, model, None)
        fit_minutes = (time.perf_counter() - start) / 60
        score, c, model, _ = best
        t0 = time.perf_counter()
        m = regression_metrics(test.labels, model.predict(transform(test)))
        out = {"pearson": m["pearson"], "spearman": m["spearman"], "mse": m["mse"], "metric_name": "pearson",
               "metric": m["pearson"]}
    else:  # tfidf-pair-lr
        for c in (1.0, 4.0, 16.0):
            model = LogisticRegression(C=c, max_iter=3000).fit(features["train"], train.labels)
            score = accuracy_score(validation.labels, model.predict(features["validation"]))
            if best is None or score > best[0]:
                best = (score, c, model, None)
        fit_minutes = (time.perf_counter() - start) / 60
        score, c, model, _ = best
        t0 = time.perf_counter()
        pred = model.predict(transform(test))
        names = [str(i) for i in range(int(train.labels.max()) + 1)]
        m = classification_metrics(test.labels, pred, names)
        out = {"accuracy": m["accuracy"], "macro_f1": m["macro_f1"], "metric_name": "accuracy", "metric": m["accuracy"]}
    predict_seconds = time.perf_counter() - t0
    return {"system": name, **out, "validation_metric": float(score), "train_minutes": fit_minutes,
            "predict_texts_per_s": len(test.texts) / max(predict_seconds, 1e-9), "C": c}

"""TF-IDF baselines (scikit-learn) for the accuracy benchmark, fit on exactly our splits.

    tfidf-word-lr     word 1-2-grams + LogisticRegression
    tfidf-char-svm    word 1-2 + char 2-5-grams + LinearSVC
For Chinese text (detected from the characters) both use char 1-3-grams instead. The
regularisation C is picked on the validation split (as our model picks its best checkpoint there).
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


def is_chinese(texts: list[str], sample: int = 500) -> bool:
    """True when most letters in a sample of texts are CJK ideographs."""
    chars = [c for t in texts[:sample] for c in t if not c.isspace() and not c.isdigit()]
    cjk = sum("\u4e00" <= c <= "\u9fff" for c in chars)
    return bool(chars) and cjk / len(chars) > 0.3


def _word_lr(c: float, chinese: bool) -> Pipeline:
    vec = (TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2) if chinese
           else TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1))
    return Pipeline([("tfidf", vec), ("clf", LogisticRegression(C=c, max_iter=3000))])


def _char_svm(c: float, chinese: bool) -> Pipeline:
    if chinese:
        features = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2)
    else:
        features = FeatureUnion([
            ("word", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)),
            ("char", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2)),
        ])
    return Pipeline([("tfidf", features), ("clf", LinearSVC(C=c))])


# name -> (pipeline factory (C, chinese), the C values tried)
BASELINES: dict[str, tuple[Callable[[float, bool], Pipeline], tuple[float, ...]]] = {
    "tfidf-word-lr": (_word_lr, (1.0, 4.0, 16.0)),
    "tfidf-char-svm": (_char_svm, (0.1, 0.5, 2.0)),
}


@dataclasses.dataclass
class Split:
    texts: list[str]
    labels: np.ndarray


def run_baseline(name: str, train: Split, validation: Split, test: Split) -> dict:
    """Fit `name` for each C on train, keep the best on validation, report it on test."""
    chinese = is_chinese(train.texts)
    factory, grid = BASELINES[name]
    best = None
    start = time.perf_counter()
    for c in grid:
        model = factory(c, chinese).fit(train.texts, train.labels)
        val_acc = accuracy_score(validation.labels, model.predict(validation.texts))
        if best is None or val_acc > best[0]:
            best = (val_acc, c, model)
    fit_minutes = (time.perf_counter() - start) / 60
    val_acc, c, model = best
    start = time.perf_counter()
    predicted = model.predict(test.texts)
    predict_seconds = time.perf_counter() - start
    return {
        "system": name + ("-zh" if chinese else ""),  # Chinese: char 1-3-grams
        "accuracy": float(accuracy_score(test.labels, predicted)),
        "macro_f1": float(f1_score(test.labels, predicted, average="macro")),
        "validation_accuracy": float(val_acc),
        "train_minutes": fit_minutes,
        "predict_texts_per_s": len(test.texts) / max(predict_seconds, 1e-9),
        "C": c,
    }

"""The run's baseline is bounded by its coefficients: features x classes at most MAX_COEFFICIENTS."""

import warnings

import numpy as np

from tfm_cls.classify import baseline as B


def _texts(rows: int, classes: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.arange(rows) % classes
    words = [f"w{i}" for i in range(4000)]
    texts = [" ".join([f"topic{label}"] * 3 + list(rng.choice(words, 40))) for label in labels]
    return texts, labels


def test_many_classes_keep_fewer_features_and_few_keep_the_cap(monkeypatch):
    monkeypatch.setattr(B, "MAX_COEFFICIENTS", 60_000)
    texts, labels = _texts(120, 60)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 2 texts a class: no "regression targets?" warning reaches the user
        vectorizer, model = B.fit_baseline("classes", texts, None, labels)
    assert len(vectorizer.vocabulary_) == 1_000 and model.coef_.shape == (60, 1_000)
    # the most frequent terms are kept: every label's own word
    assert all(f"topic{k}" in vectorizer.vocabulary_ for k in range(60))
    few, few_labels = _texts(120, 2)
    vectorizer, _ = B.fit_baseline("classes", few, None, few_labels)
    assert 1_000 < len(vectorizer.vocabulary_) <= B.MAX_FEATURES
    # one model a label: the cap is not divided by the labels
    sets = np.eye(60, dtype=int)[labels]
    vectorizer, _ = B.fit_baseline("label_sets", texts, None, sets)
    assert len(vectorizer.vocabulary_) > 1_000

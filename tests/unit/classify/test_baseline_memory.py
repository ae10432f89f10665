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


def test_the_runs_own_baseline_is_bounded_too_and_says_nothing_of_regression(monkeypatch):
    """The baseline every run fits (score_beside -> SelectedBaseline, the budget's probes included) keeps at
    most MAX_COEFFICIENTS / classes features: a 90-class probe of 400 long documents held 5.8 GB without it."""
    monkeypatch.setattr(B, "MAX_COEFFICIENTS", 60_000)
    texts, labels = _texts(120, 60)
    val_texts, val_labels = _texts(60, 60, seed=1)
    splits = {"train": B.Split(texts, labels), "validation": B.Split(val_texts, val_labels)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 2 texts a class: no "regression targets?" warning reaches the user
        for name in ("tfidf-word-lr", "tfidf-char-svm"):
            fitted = B.SelectedBaseline(name).fit(splits["train"], splits["validation"])
            assert fitted.model_.coef_.shape[1] <= 1_000 and fitted.model_.coef_.shape[0] == 60
    scored = B.score_beside("single_label", splits, "tfidf-word-lr")
    assert scored["validation"]["accuracy"] == 1.0  # every label's own word kept: the most frequent terms
    # two classes: the cap is 30,000 features, more than these texts hold (nothing dropped)
    two = B.SelectedBaseline("tfidf-word-lr").fit(B.Split(texts, labels % 2), B.Split(val_texts, val_labels % 2))
    assert len(two.vectorizer_.vocabulary_) == len(B.tfidf_vectorizer(min_df=1).fit(texts).vocabulary_)

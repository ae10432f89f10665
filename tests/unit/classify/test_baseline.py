"""tfm_cls/classify/baseline.py: the baselines' TF-IDF vectorizer keeps scikit-learn's word
tokens outside CJK scripts and makes each CJK character a token; the benchmarks' selected
baselines pick their grid value (and multi-label thresholds) on validation, for every task."""

import random
import re
from types import SimpleNamespace

import numpy as np
import pytest
from kits.tiny_topics import CLASSES, FILLER, WORDS
from sklearn.feature_extraction.text import TfidfVectorizer

from tfm_cls.classify.baseline import (
    SYSTEMS,
    TOKEN_PATTERN,
    SelectedBaseline,
    Split,
    baseline_names,
    pair_features,
    split_metrics,
    tfidf_vectorizer,
)

ENGLISH = [
    "Don't stop me now -- it's 4:30, isn't it?",
    "The café's naïve résumé cost $3.14 (or 42 euros); a b c.",
    "e-mail x_y __init__ a1 B2B Straße ÜBER déjà-vu",
    "I said: \"hello, world!\" ... and left at 10am.",
]


def test_english_vocabulary_is_the_default_patterns():
    ours = tfidf_vectorizer().fit(ENGLISH)
    default = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)).fit(ENGLISH)
    assert ours.vocabulary_ == default.vocabulary_
    assert (ours.transform(ENGLISH) != default.transform(ENGLISH)).nnz == 0


@pytest.mark.parametrize("text", ENGLISH)
def test_english_tokens_are_the_default_patterns(text):
    assert re.findall(TOKEN_PATTERN, text) == re.findall(r"(?u)\b\w\w+\b", text)


def test_chinese_gives_characters_and_character_bigrams():
    vocabulary = set(tfidf_vectorizer().fit(["我爱北京。"]).vocabulary_)
    assert vocabulary == {"我", "爱", "北", "京", "我 爱", "爱 北", "北 京"}


def test_mixed_text_gives_words_and_characters():
    assert re.findall(TOKEN_PATTERN, "2018年去Moscow看World Cup") == [
        "2018", "年", "去", "Moscow", "看", "World", "Cup"]
    vocabulary = set(tfidf_vectorizer().fit(["hello世界 ok"]).vocabulary_)
    assert {"hello", "世", "界", "ok", "hello 世", "世 界", "界 ok"} == vocabulary


def test_kana_and_hangul_are_characters_punctuation_is_not():
    assert re.findall(TOKEN_PATTERN, "東京タワー・です 한국어") == [
        "東", "京", "タ", "ワ", "ー", "で", "す", "한", "국", "어"]


def test_overrides_replace_defaults():
    vectorizer = tfidf_vectorizer(ngram_range=(1, 1), min_df=2)
    assert vectorizer.ngram_range == (1, 1) and vectorizer.min_df == 2 and vectorizer.sublinear_tf


# ---- the selected baselines ------------------------------------------------------------------------


def _topic_texts(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """n texts, each of one class's topic words among filler, and the class ids [n]."""
    rng = random.Random(seed)
    labels = np.array([i % len(CLASSES) for i in range(n)])
    texts = [" ".join(rng.sample(FILLER, 3) + rng.sample(WORDS[CLASSES[y]], 2)) for y in labels]
    return texts, labels


def _single(seed: int, n: int = 60) -> Split:
    return Split(*_topic_texts(n, seed))


def _multi(seed: int, n: int = 90) -> Split:
    """Texts of one or two topics; targets multi-hot [n, 3]."""
    rng = random.Random(seed)
    texts, targets = [], np.zeros((n, len(CLASSES)), dtype=np.int64)
    for i in range(n):
        chosen = rng.sample(range(len(CLASSES)), 1 + i % 2)
        targets[i, chosen] = 1
        texts.append(" ".join(rng.sample(FILLER, 2) + [w for c in chosen for w in rng.sample(WORDS[CLASSES[c]], 2)]))
    return Split(texts, targets)


@pytest.mark.parametrize("name", ["tfidf-word-lr", "tfidf-char-svm"])
def test_a_single_label_baseline_keeps_the_grid_value_best_on_validation(name):
    fitted = SelectedBaseline(name).fit(_single(0), _single(1))
    assert fitted.param_ in SYSTEMS[name].grid
    validation = _single(1)
    assert fitted.validation_score_ == split_metrics("single_label", validation.targets,
                                                     fitted.predict(validation.texts))["accuracy"]
    test = _single(2)
    assert fitted.metrics(test)["accuracy"] >= 0.9 and set(fitted.metrics(test)) == {"accuracy", "macro_f1"}
    assert fitted.predict(["the tiger and a dog"]).tolist() == [0]


def test_a_grid_of_one_needs_no_validation_and_a_grid_of_several_does():
    fitted = SelectedBaseline("tfidf-word-svm").fit(_single(0))
    assert fitted.param_ == 1.0 and fitted.validation_score_ is None
    assert fitted.predict(["soup with rice"]).tolist() == [1]
    with pytest.raises(ValueError, match="tfidf-word-lr picks C"):
        SelectedBaseline("tfidf-word-lr").fit(_single(0))
    with pytest.raises(ValueError, match="unknown baseline 'tfidf-nope'"):
        SelectedBaseline("tfidf-nope")


@pytest.mark.parametrize("name", ["tfidf-ovr-lr", "tfidf-ovr-svm"])
def test_multi_label_baselines_tune_a_threshold_per_label_and_give_every_row_a_label(name):
    fitted = SelectedBaseline(name).fit(_multi(0), _multi(1))
    assert fitted.thresholds_.shape == (len(CLASSES),)
    predicted = fitted.predict(["the golf and some bread", "a very"])  # the second holds no topic word
    assert predicted.shape == (2, 3) and predicted.sum(axis=1).min() >= 1
    assert predicted[0].tolist() == [0, 1, 1]
    metrics = fitted.metrics(_multi(2))
    assert set(metrics) == {"micro_f1", "macro_f1", "subset_accuracy"} and metrics["micro_f1"] > 0.8


def test_pair_baselines_read_both_sides():
    def pairs(seed: int) -> Split:
        a, ya = _topic_texts(60, seed)
        b, yb = _topic_texts(60, seed + 100)
        order = random.Random(seed).sample(range(60), 60)
        b, yb = [b[i] for i in order], yb[order]
        return Split(a, (ya == yb).astype(int), b)  # 1: the two texts share their topic

    vectorizer = tfidf_vectorizer()
    x = pair_features(vectorizer, ["a cat", "a dog"], ["the cat", "some fish"], fit=True)
    assert x.shape == (2, 4 * len(vectorizer.vocabulary_))  # [a, b, |a - b|, a * b]
    fitted = SelectedBaseline("tfidf-pair-lr").fit(pairs(0), pairs(1))
    assert fitted.metrics(pairs(2))["accuracy"] > 0.6
    values = pairs(0)
    regression = Split(values.texts, values.targets.astype(float) * 4 + 1, values.pairs)
    ridge = SelectedBaseline("tfidf-pair-ridge").fit(regression, regression)
    assert ridge.param_ in SYSTEMS["tfidf-pair-ridge"].grid and ridge.system.param == "alpha"
    assert set(ridge.metrics(regression)) == {"pearson", "spearman", "mse"} and ridge.metrics(regression)["pearson"] > 0.9


def test_a_tokenizer_replaces_the_word_pattern():
    seen = []

    def pieces(text: str) -> list[str]:
        seen.append(text)
        return [w[:3] for w in text.split()]  # e.g. a model's word pieces

    fitted = SelectedBaseline("tfidf-word-lr", tokenizer=pieces).fit(_single(0), _single(1))
    assert "tig" in fitted.vectorizer_.vocabulary_ and "tiger" not in fitted.vectorizer_.vocabulary_ and seen


def test_each_task_has_its_baselines():
    assert baseline_names("single_label", pairs=False) == ["tfidf-word-lr", "tfidf-char-svm"]
    assert baseline_names("single_label", pairs=True) == ["tfidf-pair-lr"]
    assert baseline_names("multi_label", pairs=False) == ["tfidf-ovr-lr"]
    assert baseline_names("regression", pairs=True) == ["tfidf-pair-ridge"]
    assert baseline_names("regression", pairs=False) == ["tfidf-ridge"]
    assert all(name in SYSTEMS for task in ("single_label", "multi_label", "regression")
               for pairs in (False, True) for name in baseline_names(task, pairs))


# ---- the run's own baseline (tfm_cls.classify.finish.classical_baseline) --------------------------------


def _run_data(n_train):
    from datasets import Dataset, DatasetDict
    from kits.tiny_topics import make_texts

    from tfm_cls.data.sources import ClassificationData

    splits = DatasetDict({name: Dataset.from_list(make_texts(n, seed))
                          for name, n, seed in (("train", n_train, 0), ("validation", 40, 1), ("test", 40, 2))})
    return ClassificationData(splits, list(CLASSES), "made here", [])


@pytest.mark.parametrize("whole", [True, False])
def test_the_budgets_probe_times_the_model_the_whole_training_set_would_fit(monkeypatch, whole):
    from tfm_cls.classify import baseline as B
    from tfm_cls.classify import finish
    from tfm_cls.training import budget
    from tfm_cls.training.clock import WallClock

    # 150 training texts read as a large set (LinearSVC), probed on 50 (which alone would name logistic regression)
    monkeypatch.setattr(B, "LARGE_TRAINING_SET", 100)
    monkeypatch.setattr(budget, "BASELINE_PROBE", 50)
    if not whole:
        monkeypatch.setattr(budget, "BASELINE_MARGIN", 1e9)  # the whole fit then looks unaffordable
    data, tc = _run_data(150), SimpleNamespace(best_metric="accuracy")
    scored = finish.classical_baseline(data, "single_label", {"validation": {"accuracy": 0.5}}, tc, WallClock(60.0))
    assert scored["model"] == "tfidf-word-svm"
    assert scored["train_examples"] == (150 if whole else 50) and ("shrunk" in scored) == (not whole)
    shown = B.reported({"baseline": scored, "data": {"train_examples": 150}})
    name = "tfidf-word-svm" if whole else "tfidf-word-svm on 50 of 150 training texts"
    assert list(shown) == [name] and shown[name]["test"] == scored["test"] and set(shown[name]) == {"validation", "test"}
    assert B.reported({}) == {}


def test_the_baseline_grows_while_the_measured_cost_fits_and_never_starts_without_time(monkeypatch):
    from tfm_cls.classify import finish
    from tfm_cls.training import budget
    from tfm_cls.training.clock import WallClock

    now = [1000.0]
    monkeypatch.setattr(finish.time, "monotonic", lambda: now[0])
    fitted = []

    def fit(rows):  # 10 ms a text
        fitted.append(rows)
        now[0] += rows * 0.01
        return {"train_examples": rows}

    import tfm_cls.training.clock as C
    monkeypatch.setattr(C.time, "monotonic", lambda: now[0])
    clock = WallClock(20.0, started=now[0])  # 1,200 s: the baseline's share 240 s
    assert finish._baseline_in_budget(fit, 10_000, clock)["train_examples"] == 10_000
    assert fitted == [100, 400, 1600, 6400, 10_000]  # each size timed before the next is judged
    fitted.clear()
    clock = WallClock(10.0, started=now[0])  # 600 s, its share 120 s: 85 s spent, then all (~150 s) does not fit
    scored = finish._baseline_in_budget(fit, 10_000, clock)
    assert fitted == [100, 400, 1600, 6400] and "6400 of 10000" in scored["shrunk"] and "share 120 s" in scored["shrunk"]
    fitted.clear()
    monkeypatch.setattr(budget, "BASELINE_SHARE", 1.0)  # the time left decides alone
    clock = WallClock(1.0, started=now[0])  # 60 s: 100 (1 s), 400 (4 s), 1,600 (16 s) fit; 6,400 (~96 s) does not
    scored = finish._baseline_in_budget(fit, 10_000, clock)
    assert fitted == [100, 400, 1600] and "1600 of 10000" in scored["shrunk"]
    fitted.clear()
    clock = WallClock(1.0, started=now[0] - 50)  # 10 s left: not even the probe
    assert finish._baseline_in_budget(fit, 10_000, clock) is None and not fitted
    assert clock.shrunk == ["no classical baseline (10 s left)"]

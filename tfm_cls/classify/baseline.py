"""The classical baseline, the library's one implementation (the report's, the benchmarks'): TF-IDF
features and a linear model, trained in seconds on a run's training split and scored with the
run's own metrics.

    single_label   word 1-2-gram TF-IDF, each CJK character a word (TOKEN_PATTERN below)
                   -> logistic regression (multinomial)
    multi_label    the same features -> one logistic regression per label (one-vs-rest), 0.5
    regression     the same features -> ridge regression
    pairs          [tfidf(a), tfidf(b), |tfidf(a) - tfidf(b)|, tfidf(a) * tfidf(b)] (the usual
                   sentence-pair features) instead of one text's

Its scores become "logits" for the head's metrics (log-probabilities; logit(p) per label; the
value), so the table compares like with like. When it is as good as the Transformer, the
Transformer is not worth deploying.

One vectorizer for any mix of scripts: scikit-learn's default token pattern `(?u)\\b\\w\\w+\\b` reads a Chinese or Japanese text written
without spaces as one word, so its word n-grams are near useless there. `TOKEN_PATTERN` keeps
exactly those word tokens for every other script and makes each CJK ideograph, kana and hangul
syllable its own token (as BERT's basic tokenizer does for ideographs), so word 1-2-grams give
CJK character unigrams and bigrams. No language detection is needed.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

# Ideographs (the ranges of BERT's `_is_chinese_char`), hiragana, katakana (with its phonetic
# extension and the half-width forms) and hangul syllables.
CJK_RANGES = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\u31f0-\u31ff"  # katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
    "\U00020000-\U0002a6df\U0002a700-\U0002ceaf"  # CJK extensions B-E
    "\U0002f800-\U0002fa1f"  # CJK compatibility ideographs supplement
)

_WORD_CHAR = f"[^\\W{CJK_RANGES}]"  # a word character (\w) of any other script
TOKEN_PATTERN = (
    f"(?u)(?<!{_WORD_CHAR}){_WORD_CHAR}{{2,}}(?!{_WORD_CHAR})"  # a word of 2+ characters, as \b\w\w+\b
    f"|(?=\\w)[{CJK_RANGES}]"  # one CJK character (a letter, not punctuation such as the katakana middle dot)
)
"""scikit-learn's `\\b\\w\\w+\\b` with CJK characters counted as word boundaries (on text without
CJK characters the two patterns find the same tokens), else each CJK character alone. Words are
tried first: on English that costs about 1.2x the default pattern's regex time (CJK first: 1.7x)."""


def tfidf_vectorizer(**overrides: Any) -> Any:
    """A scikit-learn TfidfVectorizer of sublinear-tf word 1-2-grams over `TOKEN_PATTERN`
    (CJK: character 1-2-grams); keyword arguments replace or add TfidfVectorizer's."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(**{"sublinear_tf": True, "ngram_range": (1, 2), "token_pattern": TOKEN_PATTERN, **overrides})


def _features(vectorizer: Any, texts: list[str], pairs: list[str] | None, fit: bool = False) -> Any:
    import scipy.sparse as sp

    if pairs is None:
        return vectorizer.fit_transform(texts) if fit else vectorizer.transform(texts)
    if fit:
        vectorizer.fit(texts + pairs)
    a, b = vectorizer.transform(texts), vectorizer.transform(pairs)
    return sp.hstack([a, b, abs(a - b), a.multiply(b)]).tocsr()


def fit_baseline(kind: str, texts: list[str], pairs: list[str] | None, targets: np.ndarray, seed: int = 0) -> Any:
    """A fitted (vectorizer, model) pair for `kind` (classes, label_sets, values)."""
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsRestClassifier

    vectorizer = tfidf_vectorizer(min_df=1, max_features=200_000)
    x = _features(vectorizer, texts, pairs, fit=True)
    if kind == "values":
        model = Ridge(alpha=1.0)
    elif kind == "label_sets":
        model = OneVsRestClassifier(LogisticRegression(C=4.0, max_iter=1000, random_state=seed))
    else:
        model = LogisticRegression(C=4.0, max_iter=1000, random_state=seed)
    model.fit(x, targets)
    return vectorizer, model


def baseline_logits(kind: str, fitted: Any, texts: list[str], pairs: list[str] | None, num_classes: int) -> np.ndarray:
    """The baseline's outputs as logits [N, outputs] for the head's metrics."""
    vectorizer, model = fitted
    x = _features(vectorizer, texts, pairs)
    if kind == "values":
        return model.predict(x).astype(np.float32)[:, None]
    p = np.clip(model.predict_proba(x), 1e-7, 1 - 1e-7)
    if kind == "label_sets":
        return np.log(p / (1 - p)).astype(np.float32)
    out = np.full((len(texts), num_classes), np.log(1e-7), dtype=np.float32)  # classes unseen in training
    out[:, model.classes_] = np.log(p)
    return out


def run_baseline(kind: str, train: dict[str, Any], test: dict[str, Any], num_classes: int) -> dict[str, Any]:
    """Fit on `train` and score `test` ({"texts", "pairs", "targets"}); the logits and seconds taken."""
    start = time.perf_counter()
    fitted = fit_baseline(kind, train["texts"], train["pairs"], train["targets"])
    logits = baseline_logits(kind, fitted, test["texts"], test["pairs"], num_classes)
    return {"logits": logits, "seconds": time.perf_counter() - start,
            "model": "TF-IDF (word 1-2-grams, CJK character 1-2-grams) + " + {"values": "ridge", "label_sets": "one-vs-rest logistic regression"}
            .get(kind, "logistic regression") + (" on pair features" if train["pairs"] is not None else "")}


def out_of_fold_probabilities(texts: list[str], pairs: list[str] | None, targets: np.ndarray, num_classes: int,
                              folds: int = 5, seed: int = 0) -> np.ndarray:
    """Single-label: probabilities [N, C] of the baseline, each text's from the fold model that
    did not train on it (stratified k-fold; plain k-fold where a class is rarer than k)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = np.bincount(targets, minlength=num_classes)
    splitter = (StratifiedKFold(folds, shuffle=True, random_state=seed) if counts[counts > 0].min() >= folds
                else KFold(folds, shuffle=True, random_state=seed))
    probs = np.zeros((len(texts), num_classes))
    for fit_rows, held in splitter.split(texts, targets):
        fitted = fit_baseline("classes", [texts[i] for i in fit_rows], None if pairs is None else
                              [pairs[i] for i in fit_rows], targets[fit_rows], seed)
        logits = baseline_logits("classes", fitted, [texts[i] for i in held], None if pairs is None else
                                 [pairs[i] for i in held], num_classes).astype(np.float64)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs[held] = e / e.sum(axis=1, keepdims=True)
    return probs

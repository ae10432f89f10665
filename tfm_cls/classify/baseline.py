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

The benchmarks' baselines (`SelectedBaseline`, named in `SYSTEMS`) are the same features with a
model fitted for each value of a small grid (C, or ridge's alpha) and the one best on the
validation split kept, as our model keeps its best checkpoint there:

    tfidf-word-lr     word 1-2-grams -> logistic regression                       (single label)
    tfidf-char-svm    word 1-2-grams + char_wb 2-5-grams -> LinearSVC             (single label)
    tfidf-word-svm    word 1-2-grams (min_df 2) -> LinearSVC, C = 1               (single label)
    tfidf-pair-lr     pair features -> logistic regression                        (pairs, classes)
    tfidf-ovr-lr      one-vs-rest logistic regression, each label's threshold on its probability
                      tuned on validation (tfm_cls.classify.heads.tune_thresholds), picked by macro-F1
    tfidf-ovr-svm     one-vs-rest LinearSVC, each label's threshold on its decision score tuned on
                      validation; picked by micro-F1                              (multi label)
    tfidf-ridge       ridge regression; tfidf-pair-ridge on pair features         (regression)

Multi-label rows with no label over its threshold get their top label, as ours
(tfm_cls.runtime.heads.MultiLabel); metrics are tfm_cls.classify.metrics', the same as ours.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_FEATURES = 200_000
"""The run's baseline keeps at most this many word 1-2-grams (the most frequent)."""
MAX_COEFFICIENTS = 4_000_000
"""...and at most this many features x classes of a multinomial model: L-BFGS keeps ~25 float64 copies
of the coefficients, so 800 MB at most (a 90-class baseline of 200,000 features held 6.5 GB for 400
long documents; docs/recipe.md)."""

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


def pair_features(vectorizer: Any, texts: list[str], pairs: list[str] | None, fit: bool = False) -> Any:
    """TF-IDF rows [N, V] of `texts` or, with `pairs`, [a, b, |a - b|, a * b] rows [N, 4V] of the
    two sides (the vectorizer fitted on both sides' texts when `fit`)."""
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

    classes = len(np.unique(targets)) if kind == "classes" else 1  # one model a label (OvR): one row at a time
    vectorizer = capped(tfidf_vectorizer(min_df=1, max_features=MAX_FEATURES), classes)
    x = pair_features(vectorizer, texts, pairs, fit=True)
    if kind == "values":
        model = Ridge(alpha=1.0)
    elif kind == "label_sets":
        model = OneVsRestClassifier(LogisticRegression(C=4.0, max_iter=1000, random_state=seed))
    else:
        model = LogisticRegression(C=4.0, max_iter=1000, random_state=seed)
    with warnings.catch_warnings():
        # a budget's first probe may hold 100 texts of 90 classes: scikit-learn then asks whether the
        # targets are a regression's; they are classes
        warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
        model.fit(x, targets)
    return vectorizer, model


def baseline_logits(kind: str, fitted: Any, texts: list[str], pairs: list[str] | None, num_classes: int) -> np.ndarray:
    """The baseline's outputs as logits [N, outputs] for the head's metrics."""
    vectorizer, model = fitted
    x = pair_features(vectorizer, texts, pairs)
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


# ---- the benchmarks' baselines: a model per grid value, the best on validation kept --------------------


@dataclasses.dataclass
class Split:
    """One split of a labelled text set as the baselines read it."""

    texts: list[str]
    targets: np.ndarray
    """Single-label class ids [N]; multi-label multi-hot [N, C]; regression values [N]."""
    pairs: list[str] | None = None
    """Sentence pairs: the second text of each row [N]."""


def _logistic(c: float, max_iter: int = 3000) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=max_iter)


def _linear_svm(c: float) -> Any:
    from sklearn.svm import LinearSVC

    return LinearSVC(C=c)


def _one_vs_rest(estimator: Callable[[float], Any], c: float) -> Any:
    from sklearn.multiclass import OneVsRestClassifier

    return OneVsRestClassifier(estimator(c), n_jobs=1)


def _ridge(alpha: float) -> Any:
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha)


def capped(vectorizer: Any, classes: int) -> Any:
    """`vectorizer` keeping at most MAX_COEFFICIENTS / `classes` features, the most frequent (a union's parts
    an even share each; a part's own smaller max_features stands): what a model of one coefficient row a
    class holds stays bounded however many classes and n-grams the texts have."""
    cap = max(MAX_COEFFICIENTS // max(classes, 1), 1)
    parts = [part for _, part in vectorizer.transformer_list] if hasattr(vectorizer, "transformer_list") else [vectorizer]
    for part in parts:
        share, current = max(cap // len(parts), 1), part.get_params().get("max_features")
        if current is None or current > share:
            part.set_params(max_features=share)
    return vectorizer


def words_and_chars() -> Any:
    """Word 1-2-grams (`tfidf_vectorizer`) beside char_wb 2-5-grams (min_df 2), one feature space."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion

    return FeatureUnion([
        ("word", tfidf_vectorizer()),
        ("char", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2)),
    ])


@dataclasses.dataclass(frozen=True)
class System:
    """A selected baseline: its features, its model for one grid value, the grid, and the
    validation metric that picks the value."""

    task: str
    """single_label, multi_label or regression."""
    model: Callable[[float], Any]
    grid: tuple[float, ...]
    metric: str
    """accuracy, macro_f1, micro_f1 or pearson, on validation."""
    features: Callable[[], Any] = functools.partial(tfidf_vectorizer, min_df=1)
    scores: str = "predict"
    """The model's method whose output is decided on: predict, predict_proba or decision_function."""
    default_threshold: float = 0.5
    """Multi-label: a label without positives in validation keeps this threshold (0 on decision scores)."""
    param: str = "C"


SYSTEMS: dict[str, System] = {
    "tfidf-word-lr": System("single_label", _logistic, (1.0, 4.0, 16.0), "accuracy"),
    "tfidf-char-svm": System("single_label", _linear_svm, (0.1, 0.5, 2.0), "accuracy", features=words_and_chars),
    "tfidf-word-svm": System("single_label", _linear_svm, (1.0,), "accuracy",
                             features=functools.partial(tfidf_vectorizer, min_df=2)),
    "tfidf-pair-lr": System("single_label", _logistic, (1.0, 4.0, 16.0), "accuracy"),
    "tfidf-ovr-lr": System("multi_label", functools.partial(_one_vs_rest, functools.partial(_logistic, max_iter=2000)),
                           (1.0, 4.0, 16.0), "macro_f1", scores="predict_proba"),
    "tfidf-ovr-svm": System("multi_label", functools.partial(_one_vs_rest, _linear_svm), (0.1, 0.5, 2.0), "micro_f1",
                            scores="decision_function", default_threshold=0.0),
    "tfidf-ridge": System("regression", _ridge, (0.3, 1.0, 3.0, 10.0), "pearson", param="alpha"),
    "tfidf-pair-ridge": System("regression", _ridge, (0.3, 1.0, 3.0, 10.0), "pearson", param="alpha"),
}


def baseline_names(task: str, pairs: bool) -> list[str]:
    """The selected baselines a data set of `task` (with sentence `pairs` or not) is compared with."""
    if task == "multi_label":
        return ["tfidf-ovr-lr"]
    if task == "regression":
        return ["tfidf-pair-ridge"] if pairs else ["tfidf-ridge"]
    return ["tfidf-pair-lr"] if pairs else ["tfidf-word-lr", "tfidf-char-svm"]


def split_metrics(task: str, targets: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """The task's metrics (tfm_cls.classify.metrics, ours) of decisions against targets, without
    the per-class tables: accuracy / macro_f1; micro_f1 / macro_f1 / subset_accuracy; pearson /
    spearman / mse."""
    from tfm_cls.classify.metrics import classification_metrics, multi_label_metrics, regression_metrics

    if task == "regression":
        m = regression_metrics(targets, predicted)
        return {k: m[k] for k in ("pearson", "spearman", "mse")}
    if task == "multi_label":
        m = multi_label_metrics(targets, predicted, [str(i) for i in range(targets.shape[1])])
        return {k: m[k] for k in ("micro_f1", "macro_f1", "subset_accuracy")}
    classes = int(max(np.max(targets), np.max(predicted))) + 1
    m = classification_metrics(targets, predicted, [str(i) for i in range(classes)])
    return {k: m[k] for k in ("accuracy", "macro_f1")}


class SelectedBaseline:
    """One of `SYSTEMS` fitted for each value of its grid on a training split, the value best on
    validation kept (ties: the first). scikit-learn's shape: `fit` returns self and sets the
    attributes ending in `_`; `predict` gives decisions (class ids [N], multi-hot [N, C] or values
    [N]). `tokenizer` (text -> tokens) replaces the word pattern, e.g. by a model's word pieces."""

    def __init__(self, name: str, tokenizer: Callable[[str], list[str]] | None = None) -> None:
        if name not in SYSTEMS:
            raise ValueError(f"unknown baseline {name!r}; known: {', '.join(SYSTEMS)}")
        self.name = name
        self.tokenizer = tokenizer

    @property
    def system(self) -> System:
        return SYSTEMS[self.name]

    def _vectorizer(self, classes: int) -> Any:
        if self.tokenizer is None:
            return capped(self.system.features(), classes)
        from sklearn.feature_extraction.text import TfidfVectorizer

        return capped(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1, tokenizer=self.tokenizer,
                                      lowercase=False, token_pattern=None), classes)

    def _decide(self, scores: np.ndarray, thresholds: np.ndarray | None) -> np.ndarray:
        """The model's outputs -> decisions (multi-label: each label's threshold, at least one label)."""
        if self.system.task != "multi_label":
            return scores
        from tfm_cls.runtime.heads import MultiLabel

        return MultiLabel(thresholds=thresholds).predicted(scores)

    def fit(self, train: Split, validation: Split | None = None) -> SelectedBaseline:
        """Fit on `train`, keep the grid value best on `validation` (needed unless the grid has one
        value and the task no thresholds to tune; without it `validation_score_` is None)."""
        start = time.perf_counter()
        system = self.system
        if validation is None and (len(system.grid) > 1 or system.task == "multi_label"):
            raise ValueError(f"{self.name} picks {system.param} or thresholds on a validation split: give one")
        # one row of coefficients a class (single label: a multinomial or one-vs-rest model); a label's own model
        classes = len(np.unique(train.targets)) if system.task == "single_label" else 1
        self.vectorizer_ = self._vectorizer(classes)
        x_train = pair_features(self.vectorizer_, train.texts, train.pairs, fit=True)
        with warnings.catch_warnings():
            # a budget's first probe may hold 100 texts of 90 classes: scikit-learn then asks whether the
            # targets are a regression's; they are classes
            warnings.filterwarnings("ignore", message="The number of unique classes is greater than 50%")
            return self._fit_grid(x_train, train, validation, start)

    def _fit_grid(self, x_train: Any, train: Split, validation: Split | None, start: float) -> SelectedBaseline:
        """`fit`'s models, one a grid value, on the training features `x_train`."""
        from tfm_cls.classify.heads import tune_thresholds

        system = self.system
        if validation is None:
            self.model_ = system.model(system.grid[0]).fit(x_train, train.targets)
            self.param_, self.validation_score_, self.thresholds_ = system.grid[0], None, None
            self.fit_seconds_ = time.perf_counter() - start
            return self
        x_validation = pair_features(self.vectorizer_, validation.texts, validation.pairs)
        best = None
        for param in system.grid:
            model = system.model(param).fit(x_train, train.targets)
            scores = getattr(model, system.scores)(x_validation)
            thresholds = None
            if system.task == "multi_label":
                thresholds = tune_thresholds(scores, validation.targets, "per_label", fixed=system.default_threshold)
            predicted = self._decide(scores, thresholds)
            score = split_metrics(system.task, validation.targets, predicted)[system.metric]
            if best is None or score > best[0]:
                best = (score, param, model, thresholds)
        self.validation_score_, self.param_, self.model_, self.thresholds_ = best
        self.fit_seconds_ = time.perf_counter() - start
        return self

    def predict(self, texts: list[str], pairs: list[str] | None = None) -> np.ndarray:
        """Decisions of the kept model on raw texts (features included)."""
        scores = getattr(self.model_, self.system.scores)(pair_features(self.vectorizer_, texts, pairs))
        return self._decide(scores, self.thresholds_)

    def metrics(self, split: Split) -> dict[str, Any]:
        """`split_metrics` of this baseline's decisions on `split`."""
        return split_metrics(self.system.task, split.targets, self.predict(split.texts, split.pairs))


LARGE_TRAINING_SET = 20_000
"""From this many training texts a run's single-label baseline is tfidf-word-svm (one LinearSVC fit)
instead of tfidf-word-lr (three logistic regressions): seconds instead of minutes."""


def run_baseline_name(task: str, pairs: bool, train_size: int) -> str:
    """The baseline every run fits beside its model (`train.baseline`): the cheapest selected one of
    the task (`baseline_names`' first; tfidf-word-svm on large single-label sets)."""
    if task == "single_label" and not pairs and train_size >= LARGE_TRAINING_SET:
        return "tfidf-word-svm"
    return baseline_names(task, pairs)[0]


def score_beside(task: str, splits: dict[str, Split], name: str | None = None) -> dict[str, Any]:
    """The run's baseline (`name`, default `run_baseline_name` of these training texts: a probe on a sample
    of them names the whole set's) fitted on splits["train"] (its grid value picked on
    splits["validation"]) and scored on validation and, where given, test: {"model", the grid value,
    "fit_seconds", "train_examples", "validation": metrics, "test": metrics}."""
    train = splits["train"]
    name = name or run_baseline_name(task, train.pairs is not None, len(train.texts))
    fitted = SelectedBaseline(name).fit(train, splits["validation"])
    return {"model": name, fitted.system.param: fitted.param_, "fit_seconds": fitted.fit_seconds_,
            "train_examples": len(train.texts),
            **{split: fitted.metrics(splits[split]) for split in ("validation", "test") if split in splits}}


def reported(metrics: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The run's own baseline (metrics.json `baseline`, `train.baseline`) as the card and the report page
    show it, {name: {split: metrics}}; {} where the run fitted none. One the wall clock cut to a
    sample of the training texts says so in its name: its scores are not the classical model's."""
    baseline = metrics.get("baseline")
    if not baseline:
        return {}
    name = baseline["model"]
    if baseline.get("shrunk"):
        fitted, whole = baseline.get("train_examples"), metrics.get("data", {}).get("train_examples")
        name += (f" on {fitted:,} of {whole:,} training texts" if fitted and whole
                 else " on a sample of the training texts")
    return {name: {split: baseline[split] for split in ("validation", "test") if split in baseline}}

"""TextClassifier: scikit-learn's estimator conventions on text input, the same training code as
`tfm-cls train`, labels as given, save / load, ONNX export, Pipeline, cross_val_score, GridSearchCV
and sklearn-style errors."""

import json

import numpy as np
import pytest
import yaml
from kits.api_tiny import CLASSES, make_texts, tiny_kwargs
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks as checks

from tfm_cls import TextClassifier

TEXTS, LABELS = make_texts(90, 0)
TEST_TEXTS, TEST_LABELS = make_texts(30, 2)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("api_fit") / "run"
    clf = TextClassifier("trec", run_dir=str(run_dir), **tiny_kwargs())
    returned = clf.fit(TEXTS, LABELS)
    return clf, returned, run_dir


@pytest.mark.parametrize("check", [
    checks.check_get_params_invariance, checks.check_set_params,
    checks.check_parameters_default_constructible, checks.check_estimator_cloneable, checks.check_estimator_repr,
    checks.check_do_not_raise_errors_in_init_or_set_params, checks.check_estimators_unfitted,
], ids=lambda c: c.__name__)
def test_sklearn_estimator_checks(check):
    check("TextClassifier", TextClassifier("trec", train__lr=1e-3, model__num_layers=3))


def test_no_attributes_set_in_init_but_the_parameters():
    """sklearn's check reads the __init__ signature, so it sees the fixed parameters only; the
    config overrides (`**overrides`) are parameters too and are the only other attributes."""
    checks.check_no_attributes_set_in_init("TextClassifier", TextClassifier("trec"))
    clf = TextClassifier("trec", train__lr=1e-3)
    assert set(vars(clf)) == set(clf.get_params()) == {"config", "run_dir", "train__lr"}


def test_get_set_params_round_trip_and_clone():
    clf = TextClassifier("trec", train__lr=1e-3, model__dropout=0.3, seed=7)
    params = clf.get_params()
    assert params == {"config": "trec", "run_dir": None, "train__lr": 1e-3, "model__dropout": 0.3, "seed": 7}
    copy = clone(clf)
    assert copy is not clf and copy.get_params() == params
    assert copy.set_params(train__lr=5e-4, train__epochs=2) is copy
    assert copy.get_params()["train__lr"] == 5e-4 and copy.get_params()["train__epochs"] == 2
    assert TextClassifier(**copy.get_params()).get_params() == copy.get_params()
    cfg = copy.build_config()
    assert (cfg.train.lr, cfg.train.epochs, cfg.model.dropout, cfg.seed) == (5e-4, 2, 0.3, 7)


def test_fit_returns_self_and_trains_through_train(fitted):
    clf, returned, run_dir = fitted
    assert returned is clf
    assert list(clf.classes_) == sorted(set(LABELS))
    assert json.loads((run_dir / "labels.json").read_text()) == sorted(set(LABELS))
    assert not (run_dir / "data").exists()  # the texts reach train in memory, not as files
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["data"]["name"] == "in-memory" and config["data"]["path"] is None
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics == clf.metrics_ and "test" not in metrics  # the estimator never scores a test split
    assert metrics["data"]["validation_examples"] == 9 and metrics["data"]["train_examples"] == 81
    assert "test_examples" not in metrics["data"] and metrics["data"]["carved_from_train"] == []
    assert metrics["data"]["source"] == "TextClassifier.fit (texts in memory)"
    assert not (run_dir / "report.txt").exists()  # the report and confusion matrix are of a test split
    assert (run_dir / "README.md").is_file() and (run_dir / "config.yaml").is_file()


def test_predict_shape_types_and_score(fitted):
    clf, _, _ = fitted
    pred = clf.predict(TEST_TEXTS)
    assert pred.shape == (30,) and all(isinstance(p, str) for p in pred) and set(pred) <= set(CLASSES)
    proba = clf.predict_proba(TEST_TEXTS)
    assert proba.shape == (30, 3) and np.allclose(proba.sum(1), 1, atol=1e-5)
    assert list(pred) == list(clf.classes_[proba.argmax(1)])
    assert clf.score(TEST_TEXTS, TEST_LABELS) == accuracy_score(TEST_LABELS, pred)
    assert clf.score(TEST_TEXTS, TEST_LABELS) > 0.8  # the topic words are easy to learn


def test_int_labels_come_back_as_ints(tmp_path):
    labels = [CLASSES.index(y) * 10 + 3 for y in LABELS]  # 3, 13, 23
    clf = TextClassifier("trec", run_dir=str(tmp_path / "run"), **tiny_kwargs()).fit(TEXTS, np.asarray(labels))
    pred = clf.predict(TEST_TEXTS[:5])
    assert list(clf.classes_) == [3, 13, 23] and pred.dtype.kind == "i"
    loaded = TextClassifier.load(tmp_path / "run")
    assert loaded.predict(TEST_TEXTS[:5]).tolist() == pred.tolist()
    assert loaded.classes_.dtype.kind == "i"


def test_save_load_and_export_onnx(fitted, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    clf, _, _ = fitted
    saved = clf.save(tmp_path / "saved")
    assert not (saved / "data").exists() and not (saved / "last.ckpt").exists()
    loaded = TextClassifier.load(saved)
    assert np.allclose(loaded.predict_proba(TEST_TEXTS), clf.predict_proba(TEST_TEXTS), atol=1e-6)
    assert list(loaded.predict(TEST_TEXTS)) == list(clf.predict(TEST_TEXTS))
    path = loaded.export_onnx(tmp_path / "saved" / "model.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].name == "input_ids"
    assert "`model.onnx` is here" in (saved / "README.md").read_text()
    with pytest.raises(ValueError, match="not empty"):
        clf.save(saved)


def test_pipeline_with_a_cleaning_step(tmp_path, monkeypatch):
    import tfm_cls.train.recipe as T

    def clean(texts):
        return [t.lower().replace("!", "").strip() for t in texts]

    trained_on, train = [], T.train

    def spy_train(cfg, data=None, **kwargs):
        trained_on.extend(t for split in data.splits.values() for t in split["text"])
        return train(cfg, data, **kwargs)

    monkeypatch.setattr(T, "train", spy_train)
    noisy = [t.upper() + " !!" for t in TEXTS]
    pipe = Pipeline([("clean", FunctionTransformer(clean)),
                     ("clf", TextClassifier("trec", run_dir=str(tmp_path / "run"), **tiny_kwargs()))])
    pipe.fit(noisy, LABELS)
    assert sorted(trained_on) == sorted(clean(noisy))  # the estimator was fit on the cleaned texts, all of them
    assert pipe.score([t.upper() + " !!" for t in TEST_TEXTS], TEST_LABELS) > 0.8


def test_cross_val_score_and_grid_search():
    clf = TextClassifier("trec", **tiny_kwargs())
    scores = cross_val_score(clf, TEXTS, LABELS, cv=2)
    assert scores.shape == (2,) and (scores > 0.6).all()
    grid = GridSearchCV(TextClassifier("trec", **tiny_kwargs()), {"train__lr": [1e-2, 2e-3]}, cv=2)
    grid.fit(TEXTS, LABELS)
    assert grid.best_params_["train__lr"] in (1e-2, 2e-3)
    assert grid.best_estimator_.get_params()["train__lr"] == grid.best_params_["train__lr"]
    assert len(grid.cv_results_["mean_test_score"]) == 2


def test_predict_before_fit_is_not_fitted_error():
    with pytest.raises(NotFittedError):
        TextClassifier().predict(["a text"])
    with pytest.raises(NotFittedError):
        TextClassifier().save("anywhere")


@pytest.mark.parametrize("texts, labels, message", [
    (["a b", "c d", "e f"], ["x", "y"], "differ in length: 3 texts, 2 labels"),
    ([], [], "empty list"),
    (["a b", 7, "c"], ["x", "y", "x"], r"texts\[1\]: expected a string, got int"),
    ("just one string", ["x"], "single str"),
    (["a b", "c d", "e f"], ["x", "x", "x"], "at least two classes"),
])
def test_bad_input_is_a_value_error_naming_it(texts, labels, message):
    with pytest.raises(ValueError, match=message):
        TextClassifier("trec", **tiny_kwargs()).fit(texts, labels)


def test_unknown_preset_or_override_key_is_a_value_error():
    with pytest.raises(ValueError, match="no preset has that name"):
        TextClassifier("no-such-preset").fit(TEXTS, LABELS)
    with pytest.raises(ValueError, match="unknown key 'lrr' under train"):
        TextClassifier("trec", train__lrr=1e-3).fit(TEXTS, LABELS)
    with pytest.raises(ValueError, match="validation labels"):
        TextClassifier("trec", **tiny_kwargs()).fit(TEXTS, LABELS, validation=(TEST_TEXTS[:3], ["animals", "nope", "food"]))


def test_import_loads_no_torch():
    import subprocess
    import sys

    code = "import sys, tfm_cls, tfm_cls.cli; tfm_cls.cli.build_parser(); print('torch' in sys.modules, 'sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]

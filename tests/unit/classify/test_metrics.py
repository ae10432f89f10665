"""The metrics of each task type against scikit-learn / scipy."""

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

from tfm_cls.classify.metrics import multi_label_metrics, regression_metrics


def test_multi_label_metrics_equal_sklearn():
    rng = np.random.default_rng(2)
    y_true, y_pred = (rng.random((60, 5)) < 0.3).astype(int), (rng.random((60, 5)) < 0.3).astype(int)
    names = list("abcde")
    m = multi_label_metrics(y_true, y_pred, names)
    assert m["micro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="micro"))
    assert m["macro_f1"] == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))
    assert m["subset_accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, average=None, zero_division=0)
    for j, name in enumerate(names):
        assert m["per_label"][name] == pytest.approx({"precision": p[j], "recall": r[j], "f1": f[j], "support": s[j]})


def test_regression_metrics_equal_scipy():
    rng = np.random.default_rng(3)
    gold = rng.uniform(1, 5, 80)
    pred = gold + rng.normal(0, 0.8, 80)
    m = regression_metrics(gold, pred)
    assert m["pearson"] == pytest.approx(stats.pearsonr(pred, gold)[0])
    assert m["spearman"] == pytest.approx(stats.spearmanr(pred, gold)[0])
    assert m["mse"] == pytest.approx(np.mean((pred - gold) ** 2))
    # a constant prediction has no correlation: 0, never NaN (NaN would break best-checkpoint selection)
    assert regression_metrics(gold, np.full(80, 3.0))["pearson"] == 0.0

"""Thresholds, decisions and the losses of each task type against scikit-learn / torch / brute force,
and every task metric reported and ranked (the metrics themselves: test_metrics.py)."""

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score

from tfm_cls.classify.heads import HEAD_TYPES, best_threshold, positive_weights, tune_thresholds
from tfm_cls.classify.metrics import HIGHER_IS_BETTER
from tfm_cls.config import TASK_METRICS
from tfm_cls.runtime.heads import MultiLabel


def _f1_at(scores, targets, threshold):
    return f1_score(targets, (scores >= threshold).astype(int), zero_division=0)


def test_best_threshold_is_f1_optimal_on_a_constructed_example():
    # positives at 0.9, 0.6, 0.35, negatives in between: the F1-optimal cut is not obvious;
    # brute force over every possible threshold decides.
    scores = np.array([0.9, 0.8, 0.6, 0.5, 0.4, 0.35, 0.1])
    targets = np.array([1, 0, 1, 0, 0, 1, 0])
    threshold, f1 = best_threshold(scores, targets)
    brute = max(_f1_at(scores, targets, t) for t in np.append(scores, 0.0))
    assert f1 == pytest.approx(brute)
    assert _f1_at(scores, targets, threshold) == pytest.approx(brute)
    # A clear case: everything above 0.55 is positive.
    scores = np.array([0.95, 0.9, 0.7, 0.6, 0.5, 0.2])
    targets = np.array([1, 1, 1, 1, 0, 0])
    threshold, f1 = best_threshold(scores, targets)
    assert f1 == 1.0 and 0.5 < threshold < 0.6 and threshold == pytest.approx(0.55)


def test_best_threshold_matches_brute_force_on_random_data_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(30):
        scores = np.round(rng.random(40), 1)  # many ties
        targets = (rng.random(40) < 0.3).astype(int)
        if targets.sum() == 0:
            continue
        threshold, f1 = best_threshold(scores, targets)
        brute = max(_f1_at(scores, targets, t) for t in np.unique(scores))
        assert f1 == pytest.approx(brute) and _f1_at(scores, targets, threshold) == pytest.approx(brute)


def test_best_threshold_without_positives_keeps_the_default():
    assert best_threshold(np.array([0.2, 0.7]), np.array([0, 0]), default=0.5) == (0.5, 0.0)


def test_global_threshold_maximises_micro_f1_and_fixed_is_fixed():
    rng = np.random.default_rng(1)
    probs, targets = rng.random((50, 4)), (rng.random((50, 4)) < 0.4).astype(int)
    t = tune_thresholds(probs, targets, "global")
    assert np.all(t == t[0])
    micro = f1_score(targets, (probs >= t[0]).astype(int), average="micro")
    best = max(f1_score(targets, (probs >= c).astype(int), average="micro") for c in np.unique(probs))
    assert micro == pytest.approx(best)
    per_label = tune_thresholds(probs, targets, "per_label")
    for j in range(4):
        assert _f1_at(probs[:, j], targets[:, j], per_label[j]) == pytest.approx(best_threshold(probs[:, j], targets[:, j])[1])
    assert np.all(tune_thresholds(probs, targets, "fixed", 0.3) == 0.3)


def test_decide_gives_a_row_without_labels_its_top_label_unless_told_otherwise():
    probs = np.array([[0.9, 0.2, 0.6], [0.1, 0.3, 0.2], [0.4, 0.45, 0.1]])
    thresholds = np.array([0.5, 0.5, 0.5])
    assert MultiLabel(thresholds=thresholds).predicted(probs).tolist() == [[1, 0, 1], [0, 1, 0], [0, 1, 0]]
    assert MultiLabel(thresholds=thresholds, ensure_label=False).predicted(probs).tolist() == [[1, 0, 1], [0, 0, 0], [0, 0, 0]]


def test_losses_equal_torch_nn():
    logits, targets = torch.randn(6, 4), (torch.rand(6, 4) < 0.4).float()
    weight = positive_weights(targets.numpy())
    head = HEAD_TYPES["multi_label"](pos_weight=weight)
    assert torch.allclose(head.loss(logits, targets), torch.nn.BCEWithLogitsLoss(pos_weight=weight)(logits, targets))
    counts = targets.sum(0)
    expected = torch.where(counts > 0, (6 - counts) / counts.clamp_min(1), torch.ones(4)).clamp(1e-3, 100)
    assert torch.allclose(weight, expected)
    values, gold = torch.randn(6, 1), torch.randn(6)
    assert torch.allclose(HEAD_TYPES["regression"]().loss(values, gold), torch.nn.MSELoss()(values[:, 0], gold))
    huber = HEAD_TYPES["regression"](loss_name="huber", huber_delta=0.5)
    assert torch.allclose(huber.loss(values, gold), torch.nn.HuberLoss(delta=0.5)(values[:, 0], gold))


def test_every_task_metric_is_reported_and_ranked():
    for task, names in TASK_METRICS.items():
        assert set(names) == set(HEAD_TYPES[task].metric_names), task
        assert all(name in HIGHER_IS_BETTER for name in names)
    assert HIGHER_IS_BETTER["mse"] is False and HIGHER_IS_BETTER["pearson"] is True

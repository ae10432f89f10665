"""tfm_cls.report.label_errors: confident learning on probabilities with known flipped labels."""

from __future__ import annotations

import numpy as np

from tfm_cls.report.label_errors import label_set_errors, likely_label_errors, value_errors


def test_flipped_labels_rank_first_and_the_confident_class_is_the_true_one():
    rng = np.random.default_rng(0)
    n, c = 600, 4
    true = rng.integers(0, c, n)
    probs = rng.dirichlet(np.ones(c) * 0.3, n) * 0.4
    probs[np.arange(n), true] += 0.6  # a decent model: the true class mostly on top
    probs /= probs.sum(1, keepdims=True)
    given = true.copy()
    flipped = rng.choice(n, 30, replace=False)
    given[flipped] = (true[flipped] + rng.integers(1, c, 30)) % c
    found = likely_label_errors(probs, given)
    assert sorted(found["ranking"]) == list(range(n))  # a ranking of every example
    top = set(found["ranking"][:60].tolist())
    assert len(top & set(flipped.tolist())) >= 27
    confident = found["confident"][flipped]
    assert (confident >= 0).sum() >= 10 and (confident[confident >= 0] == true[flipped][confident >= 0]).all()
    # the thresholds are the per-class mean self-confidence (Northcutt et al. 2021)
    for j in range(c):
        assert found["thresholds"][j] == probs[given == j, j].mean()


def test_a_hand_made_case():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    given = np.array([0, 1, 1, 0])
    found = likely_label_errors(probs, given)
    # thresholds: class 0 mean(0.9, 0.6) = 0.75, class 1 mean(0.2, 0.7) = 0.45: row 1 is confidently 0
    assert found["issues"] == 1 and found["ranking"][0] == 1 and found["confident"][1] == 0
    assert list(found["ranking"][1:]) == [3, 2, 0]  # then by self-confidence 0.6, 0.7, 0.9


def test_multi_label_and_regression_rankings():
    probs = np.array([[0.9, 0.1], [0.05, 0.5], [0.5, 0.5]])
    targets = np.array([[1, 0], [1, 0], [1, 0]])
    found = label_set_errors(probs, targets)
    assert found["ranking"][0] == 1 and found["worst_label"][1] == 0 and found["gap"][1] == 0.95
    z = value_errors(np.array([1.0, 2.0, 10.0, 4.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert z["ranking"][0] == 2

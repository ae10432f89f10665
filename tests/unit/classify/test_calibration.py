"""tfm_cls.classify.calibration: the fitted temperature, the reliability bins and ECE, against references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tfm_cls.classify.calibration import (
    TEMPERATURE_RANGE,
    accuracy_shift,
    calibrated_ece_noise,
    calibration_summary,
    expected_calibration_error,
    fit_temperature,
    nll,
    reliability,
)
from tfm_cls.classify.heads import Head
from tfm_cls.runtime.heads import SingleLabel, softmax


def over_confident(n: int = 4000, classes: int = 5, scale: float = 4.0, seed: int = 0):
    """Labels drawn from softmax(z); the "model" reports scale * z: over-confident by `scale`."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, size=(n, classes))
    p = softmax(z)
    labels = np.array([rng.choice(classes, p=row) for row in p])
    return (scale * z).astype(np.float32), labels


def test_the_fitted_temperature_undoes_over_confidence_and_lowers_nll_and_ece():
    logits, labels = over_confident(scale=4.0)
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(4.0, rel=0.1)  # the labels were drawn at temperature 4
    assert nll(logits, labels, t) < nll(logits, labels) - 0.1
    before = expected_calibration_error(softmax(logits), labels)
    after = expected_calibration_error(softmax(logits / t), labels)
    assert before > 0.1 and after < 0.03
    # the minimum: NLL at T is below its neighbours (LBFGS converged)
    assert nll(logits, labels, t) <= min(nll(logits, labels, t * 0.97), nll(logits, labels, t * 1.03))


def test_an_under_confident_model_gets_a_temperature_below_one():
    logits, labels = over_confident(scale=0.5, seed=1)
    assert fit_temperature(logits, labels) == pytest.approx(0.5, rel=0.1)


def test_nll_is_torch_cross_entropy():
    logits, labels = over_confident(n=50, seed=2)
    ref = torch.nn.functional.cross_entropy(torch.from_numpy(logits.astype(np.float64) / 1.7), torch.from_numpy(labels)).item()
    assert nll(logits, labels, 1.7) == pytest.approx(ref, rel=1e-9)


def test_a_separable_validation_split_keeps_the_temperature_inside_its_range():
    logits = np.array([[3.0, 0.0], [0.0, 3.0], [2.0, -1.0]], dtype=np.float32)
    labels = np.array([0, 1, 0])
    t = fit_temperature(logits, labels)  # NLL keeps falling as T -> 0: LBFGS stops where it flattens
    assert TEMPERATURE_RANGE[0] <= t < 0.5 and nll(logits, labels, t) < nll(logits, labels)
    assert fit_temperature(np.zeros((0, 2), np.float32), np.zeros(0, np.int64)) == 1.0


@pytest.mark.parametrize("temperature", [0.05, 0.3, 1.0, 2.5, 20.0])
def test_argmax_predictions_are_unchanged_by_any_temperature(temperature):
    logits, _ = over_confident(n=500, seed=3)
    raw, scaled = SingleLabel(), SingleLabel(temperature=temperature)
    assert (scaled.scores(logits).argmax(1) == raw.scores(logits).argmax(1)).all()
    # the training head's torch scores (the ONNX graph's) agree with the runtime's numpy scores
    head = Head(temperature=temperature)
    torch_scores = head.torch_scores(torch.from_numpy(logits)).numpy()
    np.testing.assert_allclose(torch_scores, scaled.scores(logits), atol=1e-6)
    assert (torch_scores.argmax(1) == logits.argmax(1)).all()


def test_temperature_one_gives_the_raw_softmax_bit_for_bit():
    logits, _ = over_confident(n=20, seed=4)
    assert np.array_equal(SingleLabel(temperature=1.0).scores(logits), softmax(logits))


def _reference_ece(probs, labels, bins=15):
    """A plain loop over the bins, (lo, hi] as Guo et al."""
    conf, pred = probs.max(1), probs.argmax(1)
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.mean() * abs((pred[inside] == labels[inside]).mean() - conf[inside].mean())
    return total


def test_ece_and_reliability_bins_match_a_plain_loop():
    logits, labels = over_confident(n=1000, seed=5)
    probs = softmax(logits.astype(np.float64))
    assert expected_calibration_error(probs, labels) == pytest.approx(_reference_ece(probs, labels), abs=1e-12)
    r = reliability(probs, labels)
    assert sum(r["count"]) == 1000 and len(r["count"]) == 15
    perfect = np.eye(3)[[0, 1, 2, 0]]
    assert expected_calibration_error(perfect, np.array([0, 1, 2, 0])) == 0.0
    assert expected_calibration_error(perfect, np.array([1, 1, 2, 0])) == pytest.approx(0.25)


def test_summary_reports_before_and_after():
    logits, labels = over_confident(seed=6)
    s = calibration_summary(logits, labels, fit_temperature(logits, labels))
    assert s["nll_after"] < s["nll_before"] and s["ece_after"] < s["ece_before"]


def test_the_calibrated_ece_noise_is_the_sampling_noise_of_calibrated_scores():
    rng = np.random.default_rng(0)
    probs = softmax(rng.normal(size=(500, 4)) * 2)
    noise = calibrated_ece_noise(probs, draws=300)
    assert 0 < noise["median"] < noise["p90"] < 0.1
    more = calibrated_ece_noise(np.tile(probs, (16, 1)), draws=100)  # 8,000 texts, same scores
    assert more["median"] < 0.4 * noise["median"]  # noise falls as 1 / sqrt(N)
    # Labels drawn from the scores themselves land inside the noise; over-confident scores beyond it.
    labels = (rng.random((500, 1)) > probs.cumsum(axis=1)).sum(axis=1).clip(max=3)
    assert expected_calibration_error(probs, labels) < 2 * noise["p90"]
    sharp = softmax(np.log(probs) * 4)  # the same ranking, far surer
    assert expected_calibration_error(sharp, labels) > 2 * calibrated_ece_noise(sharp, draws=100)["p90"]


def test_accuracy_shift_is_the_two_proportion_z():
    # 0.805 on 872 against 0.857 on 1,821 (the sst2 student of docs/report.md): ~3.5 standard errors.
    z = accuracy_shift(0.805, 872, 0.857, 1821)
    pooled = (0.805 * 872 + 0.857 * 1821) / (872 + 1821)
    assert z == pytest.approx((0.857 - 0.805) / np.sqrt(pooled * (1 - pooled) * (1 / 872 + 1 / 1821)))
    assert 3.0 < z < 4.0
    assert accuracy_shift(0.857, 1821, 0.805, 872) == pytest.approx(-z)
    assert abs(accuracy_shift(0.88, 872, 0.885, 1821)) < 1  # the teacher's splits agree
    assert accuracy_shift(1.0, 10, 1.0, 20) == 0.0 and accuracy_shift(0.5, 0, 0.5, 10) == 0.0


def test_finish_warns_when_validation_and_test_accuracy_are_far_apart(caplog):
    from tfm_cls.classify.finish import check_shift

    calibration = {"test": {"ece_before": 0.049, "ece_after": 0.036}}
    with caplog.at_level("WARNING", logger="tfm_cls.classify.finish"):
        z = check_shift({"accuracy": 0.805, "examples": 872}, {"accuracy": 0.857, "examples": 1821}, calibration)
    assert z == pytest.approx(accuracy_shift(0.805, 872, 0.857, 1821))
    assert "standard errors apart" in caplog.text and "0.0490 -> 0.0360" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="tfm_cls.classify.finish"):
        assert abs(check_shift({"accuracy": 0.885, "examples": 872}, {"accuracy": 0.885, "examples": 1821},
                               calibration)) < 1e-9
    assert caplog.text == ""
    assert check_shift({"loss": 0.3, "examples": 10}, {"loss": 0.2, "examples": 10}, calibration) is None

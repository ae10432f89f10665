"""Calibrated scores: one temperature fitted on validation logits, and the calibration error.

    fit_temperature(logits, targets)   T > 0 minimising the NLL of softmax(logits / T)
                                       (LBFGS on log T: temperature scaling, Guo et al. 2017)
    reliability(probs, targets)        15 equal-width confidence bins: count, accuracy, confidence
    expected_calibration_error(...)    ECE: the bins' |accuracy - confidence| weighted by their share
    calibrated_ece_noise(probs)        the ECE perfectly calibrated scores would show on as many texts
    accuracy_shift(...)                how many standard errors apart two splits' accuracies are

Dividing every logit of a row by the same T > 0 keeps their order, so the argmax (the predicted
label) is unchanged by construction; only how sure the scores say the model is changes. A run
stores T in calibration.json (tfm_cls.runs.CALIBRATION_FILE) and its export in the ONNX metadata
(`tfm_cls.temperature`); every path that turns logits into scores divides by it (the heads'
`scores` / `torch_scores`, tfm_cls.runtime.heads).

Single-label runs only (`train.calibration: auto` fits it there): a multi-label head's scores
are judged by per-label thresholds tuned on validation, which a per-label temperature would only
move (the decisions stay the same); a regression head has no probabilities to calibrate.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from tfm_cls.runtime.heads import softmax

logger = logging.getLogger(__name__)

ECE_BINS = 15
"""Guo et al. 2017's bin count."""
SHIFT_Z = 3.0
"""Validation and evaluated accuracies this many standard errors apart (two-sided p ~ 0.003) say
the split the temperature was fitted on does not represent the texts evaluated."""
TEMPERATURE_RANGE = (0.05, 20.0)
"""Where a fitted T is clipped to: on a validation split the model gets entirely right the NLL
keeps falling as T -> 0 (every score towards 1), and a model with one constant prediction sends
T -> infinity; neither says anything about new texts."""


def nll(logits: np.ndarray, targets: np.ndarray, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of class ids `targets` [N] under softmax(logits [N, C] / T)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1))  # [N]
    return float(np.mean(log_norm - z[np.arange(len(z)), np.asarray(targets, dtype=np.int64)]))


def fit_temperature(logits: np.ndarray, targets: np.ndarray, max_iter: int = 100) -> float:
    """The temperature T minimising the validation NLL of softmax(logits / T) (LBFGS, strong-Wolfe
    line search, on log T so that T stays positive; float64, deterministic). logits [N, C],
    targets [N] class ids. 1.0 for an empty split."""
    import torch

    if len(logits) == 0:
        return 1.0
    z = torch.from_numpy(np.asarray(logits, dtype=np.float64))  # [N, C]
    y = torch.from_numpy(np.asarray(targets, dtype=np.int64))  # [N]
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z / log_t.exp(), y)
        loss.backward()
        return loss

    optimizer.step(closure)
    temperature = float(log_t.detach().exp())
    if not math.isfinite(temperature):
        return 1.0
    low, high = TEMPERATURE_RANGE
    fitted = min(max(temperature, low), high)
    if fitted != temperature or fitted in (low, high):
        logger.warning("calibration: the fitted temperature %.4g is outside [%g, %g] (a validation split the model "
                       "gets all right, or one that says nothing); kept at %g", temperature, low, high, fitted)
    # LBFGS may stop anywhere on a flat NLL; never keep a T that scores validation worse than 1.
    return fitted if nll(logits, targets, fitted) <= nll(logits, targets, 1.0) else 1.0


def reliability(probs: np.ndarray, targets: np.ndarray, bins: int = ECE_BINS) -> dict[str, list[float]]:
    """The reliability diagram of probabilities [N, C] against class ids [N]: for each of `bins`
    equal-width bins of the top probability (the confidence), the number of rows in it, their
    accuracy and their mean confidence (0 for an empty bin)."""
    probs = np.asarray(probs, dtype=np.float64)
    confidence = probs.max(axis=1) if len(probs) else np.zeros(0)
    correct = (probs.argmax(axis=1) == np.asarray(targets)) if len(probs) else np.zeros(0, dtype=bool)
    # Bin b holds confidences in (b / bins, (b + 1) / bins]; a confidence of exactly 0 goes to bin 0.
    which = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    count = np.bincount(which, minlength=bins).astype(np.float64)
    hits = np.bincount(which, weights=correct.astype(np.float64), minlength=bins)
    sure = np.bincount(which, weights=confidence, minlength=bins)
    nonzero = np.maximum(count, 1)
    return {"count": count.tolist(), "accuracy": (hits / nonzero).tolist(), "confidence": (sure / nonzero).tolist()}


def expected_calibration_error(probs: np.ndarray, targets: np.ndarray, bins: int = ECE_BINS) -> float:
    """ECE: sum over the bins of (rows in bin / N) * |accuracy - mean confidence|."""
    if len(probs) == 0:
        return 0.0
    r = reliability(probs, targets, bins)
    count, acc, conf = (np.asarray(r[k]) for k in ("count", "accuracy", "confidence"))
    return float((count / count.sum() * np.abs(acc - conf)).sum())


def calibration_summary(logits: np.ndarray, targets: np.ndarray, temperature: float) -> dict[str, Any]:
    """NLL and ECE of one split before (T = 1) and after temperature scaling."""
    before, after = softmax(np.asarray(logits, dtype=np.float64)), softmax(np.asarray(logits, dtype=np.float64) / temperature)
    return {"nll_before": nll(logits, targets), "nll_after": nll(logits, targets, temperature),
            "ece_before": expected_calibration_error(before, targets),
            "ece_after": expected_calibration_error(after, targets)}


def calibrated_ece_noise(probs: np.ndarray, bins: int = ECE_BINS, draws: int = 200, seed: int = 0) -> dict[str, Any]:
    """The ECE that perfectly calibrated scores would show on this many texts: each draw takes
    every text's label from its own probabilities [N, C], so the scores are calibrated by
    construction and all the ECE measured is the sampling noise of `bins` bins over N texts (it
    falls as 1 / sqrt(N)). Median and 90th percentile over `draws` (seeded)."""
    probs = np.asarray(probs, dtype=np.float64)
    if len(probs) == 0:
        return {"median": 0.0, "p90": 0.0, "draws": draws}
    rng = np.random.default_rng(seed)
    cumulative = probs.cumsum(axis=1)  # [N, C]
    eces = []
    for _ in range(draws):
        labels = (rng.random((len(probs), 1)) > cumulative).sum(axis=1).clip(max=probs.shape[1] - 1)  # [N]
        eces.append(expected_calibration_error(probs, labels, bins))
    return {"median": float(np.median(eces)), "p90": float(np.percentile(eces, 90)), "draws": draws}


def accuracy_shift(accuracy_a: float, n_a: int, accuracy_b: float, n_b: int) -> float:
    """(b - a) in standard errors of the difference of two independent accuracies (pooled
    two-proportion z); 0.0 where either split is empty or both are all right / all wrong."""
    if n_a <= 0 or n_b <= 0:
        return 0.0
    pooled = (accuracy_a * n_a + accuracy_b * n_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b))
    return 0.0 if se == 0.0 else (accuracy_b - accuracy_a) / se

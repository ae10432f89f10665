"""The classifier as a sentence encoder, frozen: its unit sentence vectors and a logistic-regression head
fitted on them (SetFit's head). Read by the few-label path twice: the cross-validation's frozen encoder
(tfm_cls.bag.few_labels) and the head fitted after the contrastive stage (tfm_cls.train.contrastive).

    vectors = example_vectors(classifier, split)              # [N, D]; a windowed text: its windows' mean
    weight, bias = logistic_head(vectors, labels, C, c, seed)   # [C, D], [C]: the linear head's
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tfm_cls.data.tokenized import TokenizedSplit, collate
from tfm_cls.runtime.text import aggregate_windows


@torch.no_grad()
def sentence_vectors(classifier: nn.Module, split: TokenizedSplit, batch_size: int = 64,
                     device: torch.device | str = "cpu") -> np.ndarray:
    """[N, d_model] float32 L2-normalised pooled vectors of the split's rows (eval mode)."""
    was_training = classifier.training
    classifier.eval()
    out, pad_id = [], classifier.config.get("pad_token_id") or 0
    for start in range(0, split.num_rows, batch_size):
        batch = collate(split, list(range(start, min(start + batch_size, split.num_rows))), pad_id)
        types = batch.get("token_type_ids")
        vectors = classifier.features(batch["input_ids"].to(device), batch["attention_mask"].to(device),
                                      None if types is None else types.to(device))  # [b, D]
        out.append(F.normalize(vectors.float(), dim=-1).cpu().numpy())
    classifier.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, classifier.config["d_model"]), np.float32)


def example_vectors(classifier: nn.Module, split: TokenizedSplit, device: torch.device | str = "cpu") -> np.ndarray:
    """[N, d_model] one vector per example: its unit sentence vector, or for a windowed split (a long
    text read whole, `inference.chunk`) the mean of its windows' unit vectors. Not normalised again:
    a linear head's logits of the mean are the mean of the windows' logits, which is what chunked
    inference computes (LongText aggregate `mean` of `logits`), so the head is fitted on exactly
    what the deployed model reads: the runtime's own aggregation (`aggregate_windows`) does the mean."""
    vectors = sentence_vectors(classifier, split, device=device)  # [rows, D]
    return vectors if split.windows is None else aggregate_windows(vectors, split.windows, "mean", "logits")


def logistic_head(vectors: np.ndarray, labels: np.ndarray, num_outputs: int, c: float = 1.0,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(weight [num_outputs, D], bias [num_outputs]) of scikit-learn's LogisticRegression(C=c) on
    the vectors [N, D] (SetFit's default head): softmax over classes for class ids [N], one
    sigmoid per label for multi-hot [N, C] (one-vs-rest). Classes absent from `labels` get zero
    weights and a bias far below the others (never predicted); a binary fit's one logit z is
    split as (-z / 2, z / 2), whose softmax is sigmoid(z)."""
    from sklearn.linear_model import LogisticRegression

    d = vectors.shape[1]
    weight, bias = np.zeros((num_outputs, d), np.float64), np.full(num_outputs, -30.0)
    if labels.ndim == 2:
        for label in range(num_outputs):
            y = labels[:, label] > 0.5
            if y.all() or not y.any():  # one value only: its log-odds, clipped
                p = (y.sum() + 0.5) / (len(y) + 1.0)
                bias[label] = float(np.log(p / (1 - p)))
                continue
            fit = LogisticRegression(C=c, max_iter=1000, random_state=seed).fit(vectors, y)
            weight[label], bias[label] = fit.coef_[0], fit.intercept_[0]
        return weight.astype(np.float32), bias.astype(np.float32)
    fit = LogisticRegression(C=c, max_iter=1000, random_state=seed).fit(vectors, labels)
    classes = fit.classes_.astype(int)
    if len(classes) == 2:
        half_w, half_b = fit.coef_[0] / 2, fit.intercept_[0] / 2
        weight[classes[0]], bias[classes[0]] = -half_w, -half_b
        weight[classes[1]], bias[classes[1]] = half_w, half_b
    elif len(classes) > 2:
        weight[classes], bias[classes] = fit.coef_, fit.intercept_
    else:
        bias[classes[0]] = 0.0
    return weight.astype(np.float32), bias.astype(np.float32)

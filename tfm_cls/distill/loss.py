"""The distillation loss: each head's soft-target and gold losses (tfm_cls.classify.heads), mixed.

    single_label  soft: KL(softmax(t / T) || softmax(s / T)) * T^2, or MSE of the logits;  gold: cross-entropy
    multi_label   soft: BCE against sigmoid(t / T) * T^2, or MSE of the logits;           gold: BCE on 0/1 targets
    regression    soft: MSE to the teacher's value;                                        gold: MSE to the gold value

`distill_loss` mixes them: (1 - gold_weight) * soft + gold_weight * gold where an example has a
gold label, soft alone where it has none. `tfm-cls distill` takes single_label and regression
teachers (regression outputs and gold values are [B, 1]); multi_label is written and tested here
but refused there (no multi-label transfer set yet). `hint_loss` is the optional representation
term (loss.feature_weight), added on top for every head.
"""

from __future__ import annotations

import torch
from torch import Tensor

from tfm_cls.classify.heads import Head


def distill_loss(
    student: Tensor, teacher: Tensor, gold: Tensor, has_gold: Tensor, *, head: Head, kind: str, temperature: float,
    gold_weight: float,
) -> Tensor:
    """Mean over the batch [] of the mixed loss (module docstring); has_gold: bool [B]."""
    soft = head.soft_loss(student, teacher, kind, temperature)  # [B]
    if gold_weight == 0.0 or not bool(has_gold.any()):
        return soft.mean()
    # Rows without a gold label hold a placeholder (-1, NaN): give them a harmless value, so that
    # the unselected branch of the where() below cannot put NaN into the gradient.
    known = has_gold.reshape(-1, *[1] * (gold.dim() - 1))
    hard = head.gold_loss(student, torch.where(known, gold, torch.zeros_like(gold)))  # [B]
    mixed = torch.where(has_gold, (1.0 - gold_weight) * soft + gold_weight * hard, soft)
    return mixed.mean()


def hint_loss(student_pooled: Tensor, teacher_projected: Tensor) -> Tensor:
    """The representation hint (loss.feature_weight): mean squared error [] between the student's
    pooled vectors and the teacher's, projected to the student's width; [B, D] each."""
    return ((student_pooled.float() - teacher_projected.float()) ** 2).mean()

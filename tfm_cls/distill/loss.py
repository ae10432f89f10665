"""Soft-target and gold losses, per example, keyed by the teacher's head type.

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
import torch.nn.functional as F
from torch import Tensor


def soft_loss(student: Tensor, teacher: Tensor, head: str, kind: str, temperature: float) -> Tensor:
    """Per-example soft-target loss [B] of student and teacher outputs [B, C]."""
    t = temperature
    if head == "regression" or kind == "mse":
        return ((student.float() - teacher.float()) ** 2).mean(-1)
    if head == "single_label":
        log_p_student = F.log_softmax(student.float() / t, dim=-1)  # [B, C]
        log_p_teacher = F.log_softmax(teacher.float() / t, dim=-1)  # [B, C]
        kl = F.kl_div(log_p_student, log_p_teacher, reduction="none", log_target=True).sum(-1)  # [B]
        return kl * t * t
    if head == "multi_label":
        targets = torch.sigmoid(teacher.float() / t)
        bce = F.binary_cross_entropy_with_logits(student.float() / t, targets, reduction="none").mean(-1)
        return bce * t * t
    raise ValueError(f"unknown head type {head!r}")


def gold_loss(student: Tensor, gold: Tensor, head: str) -> Tensor:
    """Per-example loss [B] against gold labels: class ids [B] (single_label; -1 where none),
    0/1 targets [B, C] (multi_label) or values [B, C] (regression)."""
    if head == "single_label":
        return F.cross_entropy(student.float(), gold.clamp(min=0), reduction="none")
    if head == "multi_label":
        return F.binary_cross_entropy_with_logits(student.float(), gold.float(), reduction="none").mean(-1)
    if head == "regression":
        return ((student.float() - gold.float().reshape(student.shape)) ** 2).mean(-1)  # gold [B] or [B, 1]
    raise ValueError(f"unknown head type {head!r}")


def distill_loss(
    student: Tensor, teacher: Tensor, gold: Tensor, has_gold: Tensor, *, head: str, kind: str, temperature: float,
    gold_weight: float,
) -> Tensor:
    """Mean over the batch [] of the mixed loss (module docstring); has_gold: bool [B]."""
    soft = soft_loss(student, teacher, head, kind, temperature)  # [B]
    if gold_weight == 0.0 or not bool(has_gold.any()):
        return soft.mean()
    # Rows without a gold label hold a placeholder (-1, NaN): give them a harmless value, so that
    # the unselected branch of the where() below cannot put NaN into the gradient.
    known = has_gold.reshape(-1, *[1] * (gold.dim() - 1))
    hard = gold_loss(student, torch.where(known, gold, torch.zeros_like(gold)), head)  # [B]
    mixed = torch.where(has_gold, (1.0 - gold_weight) * soft + gold_weight * hard, soft)
    return mixed.mean()


def hint_loss(student_pooled: Tensor, teacher_projected: Tensor) -> Tensor:
    """The representation hint (loss.feature_weight): mean squared error [] between the student's
    pooled vectors and the teacher's, projected to the student's width; [B, D] each."""
    return ((student_pooled.float() - teacher_projected.float()) ** 2).mean()

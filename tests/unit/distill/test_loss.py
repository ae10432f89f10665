"""The soft-target loss against torch references; a one-hot teacher reduces it to cross-entropy."""

import pytest
import torch
import torch.nn.functional as F

from tfm_cls.classify.heads import Head, MultiLabelHead, RegressionHead
from tfm_cls.distill.loss import distill_loss, hint_loss


def _batch(seed=0, b=6, c=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, c, generator=g), torch.randn(b, c, generator=g) * 3, torch.randint(0, c, (b,), generator=g)


@pytest.mark.parametrize("gold_weight", [0.0, 0.3, 1.0])
def test_one_hot_teacher_reduces_to_cross_entropy(gold_weight):
    student, _, gold = _batch()
    teacher = F.one_hot(gold, 4).float() * 200.0  # softmax is exactly one-hot in float32
    has_gold = torch.ones(len(gold), dtype=torch.bool)
    loss = distill_loss(student, teacher, gold, has_gold, head=Head(), kind="kl", temperature=1.0,
                        gold_weight=gold_weight)
    torch.testing.assert_close(loss, F.cross_entropy(student, gold), rtol=1e-6, atol=1e-6)


def test_kl_at_temperature_matches_torch_kldivloss():
    student, teacher, _ = _batch(1)
    t = 2.5
    reference = torch.nn.KLDivLoss(reduction="batchmean")(F.log_softmax(student / t, -1), F.softmax(teacher / t, -1)) * t * t
    torch.testing.assert_close(Head().soft_loss(student, teacher, "kl", t).mean(), reference)


def test_mse_and_mixing_where_gold_is_missing():
    student, teacher, gold = _batch(2)
    has_gold = torch.tensor([True, False, True, False, False, True])
    loss = distill_loss(student, teacher, gold.masked_fill(~has_gold, -1), has_gold, head=Head(), kind="mse",
                        temperature=3.0, gold_weight=0.25)
    mse = ((student - teacher) ** 2).mean(-1)
    ce = F.cross_entropy(student, gold, reduction="none")
    expected = torch.where(has_gold, 0.75 * mse + 0.25 * ce, mse).mean()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(mse.mean(), F.mse_loss(student, teacher))


def test_multi_label_and_regression_heads_fit_the_same_call():
    student, teacher, _ = _batch(3)
    targets = (teacher > 0).float()
    t = 2.0
    bce = F.binary_cross_entropy_with_logits(student / t, torch.sigmoid(teacher / t)) * t * t
    torch.testing.assert_close(MultiLabelHead().soft_loss(student, teacher, "kl", t).mean(), bce)
    torch.testing.assert_close(MultiLabelHead().gold_loss(student, targets).mean(),
                               F.binary_cross_entropy_with_logits(student, targets))
    torch.testing.assert_close(RegressionHead().soft_loss(student, teacher, "kl", t).mean(), F.mse_loss(student, teacher))
    mixed = distill_loss(student, teacher, targets, torch.ones(6, dtype=torch.bool), head=RegressionHead(), kind="mse",
                         temperature=1.0, gold_weight=0.5)
    torch.testing.assert_close(mixed, 0.5 * F.mse_loss(student, teacher) + 0.5 * F.mse_loss(student, targets))


def test_hint_loss_is_the_mean_squared_error_of_the_pooled_vectors():
    g = torch.Generator().manual_seed(3)
    student, teacher = torch.randn(5, 8, generator=g), torch.randn(5, 8, generator=g)
    torch.testing.assert_close(hint_loss(student, teacher), F.mse_loss(student, teacher))
    assert hint_loss(teacher, teacher) == 0


def test_regression_rows_without_a_gold_value_mix_soft_only_and_keep_the_gradient_finite():
    """Gold values [B] with NaN where a pair has none (the pair transfer set's placeholder)."""
    student = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)  # [B, 1]
    teacher = torch.tensor([[1.5], [1.0], [4.0]])
    gold = torch.tensor([2.0, float("nan"), 5.0])
    has_gold = ~torch.isnan(gold)
    loss = distill_loss(student, teacher, gold, has_gold, head=RegressionHead(), kind="mse", temperature=2.0, gold_weight=0.25)
    soft = (student.detach()[:, 0] - teacher[:, 0]) ** 2
    hard = (student.detach()[:, 0] - torch.nan_to_num(gold)) ** 2
    expected = torch.stack([0.75 * soft[0] + 0.25 * hard[0], soft[1], 0.75 * soft[2] + 0.25 * hard[2]]).mean()
    torch.testing.assert_close(loss.detach(), expected)
    loss.backward()
    assert torch.isfinite(student.grad).all()

"""Loss weights (issue 27): train.class_weight for single-label, multi_label.pos_weight per label,
against torch's weighted losses and scikit-learn's compute_class_weight('balanced'); the
config's checks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.utils.class_weight import compute_class_weight

from tfm_cls.classify.heads import HEAD_TYPES, balanced_class_weights, check_loss_weights, head_for
from tfm_cls.config import ClassifierConfig, load_config
from tfm_cls.distill.loss import distill_loss
from tfm_cls.errors import ConfigError

LABELS = ["ham", "spam", "other"]


def _cfg(*overrides):
    return load_config(ClassifierConfig, None, ["data.path=unused", *overrides])


def test_balanced_equals_sklearn_compute_class_weight():
    rng = np.random.default_rng(0)
    targets = rng.choice(4, size=200, p=[0.7, 0.2, 0.07, 0.03])
    expected = compute_class_weight("balanced", classes=np.arange(4), y=targets)
    assert balanced_class_weights(targets, 4).numpy() == pytest.approx(expected, rel=1e-6)
    # distillation: rows without gold (-1) are not counted; a class absent from train weighs 1
    with_unlabelled = np.concatenate([targets, -np.ones(50, dtype=targets.dtype)])
    assert balanced_class_weights(with_unlabelled, 4).numpy() == pytest.approx(expected, rel=1e-6)
    absent = balanced_class_weights(np.array([0, 0, 0, 1]), 3).numpy()
    assert absent == pytest.approx([4 / 9, 4 / 3, 1.0])


def test_weighted_cross_entropy_equals_torch_and_the_gold_term_is_per_example():
    logits, gold = torch.randn(8, 3), torch.tensor([0, 1, 2, 1, 0, 0, 2, 1])
    weight = torch.tensor([0.5, 3.0, 1.25])
    head = HEAD_TYPES["single_label"](class_weight=weight, label_smoothing=0.1)
    assert torch.allclose(head.loss(logits, gold), F.cross_entropy(logits, gold, weight=weight, label_smoothing=0.1))
    assert torch.allclose(head.loss(logits, gold), torch.nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1)(logits, gold))
    per_example = head.gold_loss(logits, gold)
    assert torch.allclose(per_example, F.cross_entropy(logits, gold, weight=weight, reduction="none"))
    assert torch.allclose(per_example, weight[gold] * F.cross_entropy(logits, gold, reduction="none"))
    # distillation's mixed loss: the gold term weighted, the soft term not
    teacher, has_gold = torch.randn(8, 3), torch.tensor([True] * 5 + [False] * 3)
    plain = HEAD_TYPES["single_label"]()
    mixed = distill_loss(logits, teacher, gold, has_gold, head=head, kind="kl", temperature=2.0, gold_weight=0.5)
    soft = plain.soft_loss(logits, teacher, "kl", 2.0)
    expected = torch.where(has_gold, 0.5 * soft + 0.5 * weight[gold] * F.cross_entropy(logits, gold, reduction="none"), soft)
    assert torch.allclose(mixed, expected.mean())


def test_per_label_pos_weight_equals_bce_with_logits_and_reaches_the_gold_term():
    logits, targets = torch.randn(6, 3), (torch.rand(6, 3) < 0.4).float()
    cfg = _cfg("data.task=multi_label", "train.best_metric=micro_f1", "multi_label.pos_weight={spam: 4, other: 0.5}")
    head = head_for(cfg, targets.numpy(), labels=LABELS)
    weight = torch.tensor([1.0, 4.0, 0.5])
    assert torch.equal(head.pos_weight, weight)
    assert torch.allclose(head.loss(logits, targets), torch.nn.BCEWithLogitsLoss(pos_weight=weight)(logits, targets))
    expected = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight, reduction="none").mean(-1)
    assert torch.allclose(head.gold_loss(logits, targets), expected)


def test_head_for_resolves_class_weight_balanced_and_mappings_in_label_order():
    targets = np.array([0, 0, 0, 0, 1, 2, 2, 0])
    balanced = head_for(_cfg("train.class_weight=balanced"), targets, labels=LABELS)
    expected = compute_class_weight("balanced", classes=np.arange(3), y=targets)
    assert balanced.class_weight.numpy() == pytest.approx(expected, rel=1e-6)
    assert balanced.weights_record(LABELS)["loss_weights"]["weights"]["spam"] == pytest.approx(expected[1])
    mapped = head_for(_cfg("train.class_weight={spam: 5}"), targets, labels=LABELS)
    assert mapped.class_weight.tolist() == [1.0, 5.0, 1.0]
    assert head_for(_cfg(), targets, labels=LABELS).class_weight is None
    assert head_for(_cfg(), targets, labels=LABELS).weights_record(LABELS) == {}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.class_weight={spam: 0}", "train.class_weight.spam: expected a positive finite weight, got 0"),
        ("train.class_weight={spam: -2.5}", "train.class_weight.spam: expected a positive finite weight, got -2.5"),
        ("train.class_weight={spam: .nan}", "train.class_weight.spam: expected a positive finite weight"),
        ("train.class_weight={spam: heavy}", "train.class_weight.spam: expected a positive finite weight, got 'heavy'"),
        ("train.class_weight={}", "train.class_weight: the mapping is empty"),
        ("train.class_weight=inverse", "train.class_weight"),
        ("multi_label.pos_weight={joy: 0}", "multi_label.pos_weight.joy: expected a positive finite weight, got 0"),
    ],
)
def test_bad_weights_are_one_config_error(override, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("{", r"\{").replace("}", r"\}")):
        _cfg(override)


def test_class_weight_is_for_single_label_and_names_must_be_labels():
    with pytest.raises(ConfigError, match="train.class_weight applies to single_label only.*multi_label.pos_weight"):
        _cfg("train.class_weight=balanced", "data.task=multi_label", "train.best_metric=micro_f1")
    with pytest.raises(ConfigError, match=r"train\.class_weight: unknown label\(s\) \['spma'\]; the data's labels are"):
        check_loss_weights(_cfg("train.class_weight={spma: 3, spam: 2}"), LABELS)
    ml = _cfg("data.task=multi_label", "train.best_metric=micro_f1", "multi_label.pos_weight={joy: 2}")
    with pytest.raises(ConfigError, match=r"multi_label\.pos_weight: unknown label\(s\) \['joy'\]"):
        check_loss_weights(ml, LABELS)
    check_loss_weights(_cfg("train.class_weight={spam: 2}"), LABELS)  # known names: no error

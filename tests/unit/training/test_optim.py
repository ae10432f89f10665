"""tfm_cls.training.optim: the LR schedule, parameter groups, head-only freezing, and the time-budget
projection with the engine's stop rules."""

import math

import pytest
import torch

from tfm_cls.config import TrainConfig
from tfm_cls.model import TransformerClassifier
from tfm_cls.training.optim import get_lr, param_groups, set_body_trainable


def test_get_lr_warmup_then_cosine_and_linear():
    kw = dict(lr=1.0, warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    cosine = [get_lr(s, schedule="cosine", **kw) for s in range(120)]
    assert cosine[0] == pytest.approx(1 / 11) and cosine[9] == pytest.approx(10 / 11)
    assert all(a < b for a, b in zip(cosine[:10], cosine[1:11]))  # rising during warmup
    assert cosine[10] == pytest.approx(1.0)
    assert cosine[60] == pytest.approx(0.1 + 0.5 * (1 + math.cos(math.pi * 0.5)) * 0.9)  # halfway: 0.55
    assert cosine[110] == pytest.approx(0.1) and cosine[119] == pytest.approx(0.1)  # floor after the end
    linear = [get_lr(s, schedule="linear", **kw) for s in range(120)]
    assert linear[35] == pytest.approx(0.1 + 0.75 * 0.9)
    assert get_lr(50, schedule="constant", **kw) == 1.0


def _model(num_layers=3):
    return TransformerClassifier(vocab_size=50, num_classes=3, d_model=16, nhead=2, num_layers=num_layers,
                                 dim_feedforward=32, max_len=32)


def test_param_groups_weight_decay_layerwise_and_head_lr():
    model = _model(num_layers=3)
    groups = param_groups(model, TrainConfig(lr=1.0, head_lr=5.0, layerwise_lr_decay=0.5, weight_decay=0.1))
    by_name = {name: g for g in groups for name in g["names"]}
    assert set(by_name) == {n for n, _ in model.named_parameters()}
    for name, param in model.named_parameters():
        assert by_name[name]["weight_decay"] == (0.1 if param.dim() >= 2 else 0.0), name
    assert by_name["token_embedding.embedding.weight"]["base_lr"] == 0.5**3  # embeddings lowest
    assert by_name["encoder.layers.0.linear1.weight"]["base_lr"] == 0.5**2
    assert by_name["encoder.layers.2.linear1.weight"]["base_lr"] == 1.0
    assert by_name["encoder.norm.weight"]["base_lr"] == 1.0
    assert by_name["head.weight"]["base_lr"] == 5.0 and by_name["head.bias"]["weight_decay"] == 0.0


def test_head_only_phase_leaves_the_body_untouched():
    torch.manual_seed(0)
    model = _model(num_layers=1)
    opt = torch.optim.AdamW(param_groups(model, TrainConfig(lr=1e-2)))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    set_body_trainable(model, False)
    x = torch.randint(5, 50, (4, 7))
    torch.nn.functional.cross_entropy(model(x, torch.ones_like(x)), torch.tensor([0, 1, 2, 0])).backward()
    opt.step()
    for name, p in model.named_parameters():
        changed = not torch.equal(p, before[name])
        assert changed == name.startswith("head"), name


def test_time_budget_projection_and_stop_rules():
    from tfm_cls.config import TrainConfig
    from tfm_cls.training.engine import stop_reason
    from tfm_cls.training.optim import affordable_total_steps

    # 100 steps in 10 s since the session started; 20 s of a 30 s budget left -> 200 more steps.
    assert affordable_total_steps(100, 10.0, (0.0, 0), 30.0, planned_steps=1000) == 300
    assert affordable_total_steps(100, 10.0, (0.0, 0), 30.0, planned_steps=250) == 250  # never past the plan
    assert affordable_total_steps(100, 40.0, (0.0, 0), 30.0, planned_steps=1000) == 101  # budget spent
    cfg = TrainConfig(max_minutes=0.5)
    assert stop_reason(cfg, 10, 5.0, planned_steps=100) is None
    assert stop_reason(cfg, 10, 31.0, planned_steps=100) == "time budget of 0.5 minutes used"
    assert stop_reason(cfg, 100, 5.0, planned_steps=100) == "reached 100 steps"

"""tfm_cls.training.precision on CPU: autocast dtypes, fp16 loss scaling (unscale before clipping, skipped
steps on overflow); a whole training run in fp16: tests/integration/train/test_train_fp16.py."""


import pytest
import torch

from tfm_cls.config import ConfigError
from tfm_cls.training.precision import Precision, autocast_dtype

CPU = torch.device("cpu")


def test_autocast_dtypes():
    assert autocast_dtype("auto", CPU) is None  # CPU: fp32 unless asked
    assert autocast_dtype("fp32", CPU) is None
    assert autocast_dtype("bf16", CPU) is torch.bfloat16
    assert autocast_dtype("fp16", CPU) is torch.float16
    with pytest.raises(ConfigError, match="train.precision='fp8'"):
        autocast_dtype("fp8", CPU)


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)])
def test_autocast_lowers_matmuls_only(precision, dtype):
    amp = Precision(precision, CPU)
    layer = torch.nn.Linear(4, 4)
    with amp.autocast():
        out = layer(torch.randn(2, 4))
    assert out.dtype == dtype and layer.weight.dtype == torch.float32  # weights stay fp32
    assert amp.scaler.is_enabled() == (precision == "fp16")


def _step(precision: str, grad_clip: float, loss_scale: float = 1.0):
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 1, bias=False)
    before = layer.weight.detach().clone()
    optimizer = torch.optim.SGD(layer.parameters(), lr=1.0)
    amp = Precision(precision, CPU)
    loss = layer(torch.tensor([[1.0, 2.0, 3.0]])).sum() * loss_scale  # d loss / d w = [1, 2, 3] * loss_scale
    amp.backward(loss)
    amp.step(optimizer, layer.parameters(), grad_clip)
    return before, layer.weight.detach(), amp, layer


def test_fp16_scaling_clips_and_steps_on_the_true_gradient():
    before, after, amp, layer = _step("fp16", grad_clip=0.0)
    assert amp.scaler.get_scale() == 65536.0  # the scaled loss really was scaled
    assert torch.allclose(before - after, torch.tensor([[1.0, 2.0, 3.0]]))  # the unscaled gradient, lr 1
    assert layer.weight.grad is None  # zeroed
    before, after, _, _ = _step("fp16", grad_clip=0.5)
    assert torch.linalg.norm(before - after).item() == pytest.approx(0.5, rel=1e-5)  # clipped after unscaling
    ref_before, ref_after, _, _ = _step("fp32", grad_clip=0.5)
    assert torch.allclose(before - after, ref_before - ref_after)


def test_fp16_skips_a_step_whose_gradients_overflowed():
    before, after, amp, _ = _step("fp16", grad_clip=1.0, loss_scale=float("inf"))
    assert torch.equal(before, after)  # skipped, not applied as NaN
    assert amp.scaler.get_scale() == 65536.0 * 0.5  # and the scale backs off

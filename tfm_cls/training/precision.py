"""Mixed precision for the training engine: autocast, loss scaling and the optimizer step with
gradient clipping, in one object (engine.py holds the one `amp.backward` call of the library).

    amp = Precision("auto", device)        # bf16 autocast on CUDA, fp32 on CPU
    with amp.autocast():
        loss = ...
    amp.backward(loss)
    amp.step(optimizer, model.parameters(), grad_clip=1.0)

fp16 gets a gradient scaler (its range is too narrow for raw gradients); bf16 has fp32's range
and needs none; fp32 runs without autocast. Parameters and optimizer state stay fp32 throughout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from tfm_cls.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of `precision` on `device` (None: plain fp32). `auto` is bf16 on a GPU
    that supports it (Ampere and newer), else fp16 on CUDA, and fp32 on CPU (CPU autocast is
    only worth it on CPUs with bf16 matrix units; ask for it with bf16)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"train.precision={precision!r}: expected one of {list(PRECISIONS)}")
    if precision == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    dtype = _DTYPES[precision]
    if dtype is torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"train.precision=bf16: {torch.cuda.get_device_name(device)} has no bf16 support; use fp16")
    return dtype


class Precision:
    """Autocast context, (fp16) loss scaling and the optimizer step for one device."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.device = device
        self.dtype = autocast_dtype(precision, device)
        # Disabled (a pass-through) unless fp16: scale() returns the loss, step() calls optimizer.step().
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.dtype is torch.float16)

    @property
    def name(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, parameters: Iterable[nn.Parameter], grad_clip: float) -> None:
        """Unscale (fp16), clip the global gradient norm to `grad_clip` (0: no clipping), step
        (skipped by the scaler when fp16 gradients overflowed), zero the gradients."""
        if grad_clip > 0:
            self.scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            torch.nn.utils.clip_grad_norm_(list(parameters), grad_clip)
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.scaler.load_state_dict(state)

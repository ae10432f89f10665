"""The optimizer's side of training: AdamW parameter groups (weight decay on matrices only,
layer-wise learning rates, a separate head rate, a module's own rate), the warmup + decay
schedule, the time-budget projection of the schedule's length, and freezing the body for a
head-only phase."""

from __future__ import annotations

import math
from typing import Any

import torch

from tfm_cls.config import TrainConfig

# ---- learning rate ---------------------------------------------------------------------------------


def get_lr(step: int, *, lr: float, warmup_steps: int, total_steps: int, schedule: str, min_lr_ratio: float) -> float:
    """Learning rate of optimizer step `step` (0-based): linear warmup, then cosine / linear decay
    to lr * min_lr_ratio at `total_steps`, or constant."""
    if step < warmup_steps:
        return lr * (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return lr
    min_lr = lr * min_lr_ratio
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if schedule == "cosine":
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)
    return min_lr + (1.0 - progress) * (lr - min_lr)  # linear


def warmup_of(cfg: TrainConfig, total_steps: int) -> int:
    return cfg.warmup_steps if cfg.warmup_steps is not None else int(cfg.warmup_ratio * total_steps)


def apply_lr(optimizer: torch.optim.Optimizer, cfg: TrainConfig, step: int, total_steps: int) -> float:
    """Set every group's lr to its base lr times the schedule at `step`; return that scale."""
    scale = get_lr(step, lr=1.0, warmup_steps=warmup_of(cfg, total_steps), total_steps=total_steps,
                   schedule=cfg.schedule, min_lr_ratio=cfg.min_lr_ratio)
    for group in optimizer.param_groups:
        group["lr"] = group["base_lr"] * scale
    return scale


def affordable_total_steps(
    step: int, seconds: float, rate_start: tuple[float, int], budget: float, planned_steps: int
) -> int:
    """Under a time budget, the decay is stretched to end with it: project the steps still
    affordable at the rate measured since `rate_start` = (seconds, step) of this session."""
    rate = (step - rate_start[1]) / max(seconds - rate_start[0], 1e-9)
    affordable = step + int(rate * max(budget - seconds, 0.0))
    return max(step + 1, min(planned_steps, affordable))


# ---- parameters: weight-decay groups, layer-wise learning rates, head-only phase --------------------


_EMBEDDING_PREFIXES = ("token_embedding", "token_type_embedding", "positional_encoding", "embedding_norm")
_HEAD_PREFIXES = ("head", "pooler", "wide")
"""Trained in the head-only phase, at train.head_lr (`wide`, the bag-of-tokens branch: at its own
rate where it has one, `_own_rates`)."""


def _is_head(name: str) -> bool:
    return name.split(".")[0] in _HEAD_PREFIXES


def _lr_scale(name: str, num_layers: int, decay: float) -> float:
    """lr scale of a body parameter: encoder layer i (1-based) decay^(L - i), embeddings decay^L,
    anything above the last layer (final norm) 1."""
    if name.split(".")[0] in _EMBEDDING_PREFIXES:
        return decay**num_layers
    parts = name.split(".")
    if parts[:2] == ["encoder", "layers"]:
        return decay ** (num_layers - (int(parts[2]) + 1))
    return 1.0


def _own_rates(model: torch.nn.Module) -> dict[str, float]:
    """The submodules that carry a learning rate of their own (an `lr` attribute, not None: the
    wide branch's `wide.lr`, set by tfm_cls.bag.warm_start.train_branch): name + "." -> rate."""
    rates = {name: getattr(module, "lr", None) for name, module in model.named_modules() if name}
    return {f"{name}.": float(lr) for name, lr in rates.items() if isinstance(lr, (int, float))}


def param_groups(model: torch.nn.Module, cfg: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups: weight decay only on matrices (p.dim() >= 2); one group per learning rate.
    Each group carries `base_lr`; the schedule scales it every step. A parameter of a module with a
    rate of its own (`_own_rates`) trains at it; the head's at train.head_lr; the body's at train.lr
    (layer-wise decayed)."""
    num_layers = len(model.encoder.layers)
    own = _own_rates(model)
    groups: dict[tuple[float, bool], dict[str, Any]] = {}
    for name, param in model.named_parameters():
        rate = next((lr for prefix, lr in own.items() if name.startswith(prefix)), None)
        if rate is not None:
            base_lr = rate
        elif _is_head(name):
            base_lr = cfg.head_lr if cfg.head_lr is not None else cfg.lr
        else:
            base_lr = cfg.lr * _lr_scale(name, num_layers, cfg.layerwise_lr_decay)
        decay = param.dim() >= 2
        group = groups.setdefault(
            (base_lr, decay),
            {"params": [], "names": [], "base_lr": base_lr, "lr": base_lr, "weight_decay": cfg.weight_decay if decay else 0.0},
        )
        group["params"].append(param)
        group["names"].append(name)
    return list(groups.values())


def set_body_trainable(model: torch.nn.Module, trainable: bool) -> None:
    """Freeze / unfreeze everything but the head (frozen params get no grad, so AdamW skips them)."""
    for name, param in model.named_parameters():
        if not _is_head(name):
            param.requires_grad_(trainable)

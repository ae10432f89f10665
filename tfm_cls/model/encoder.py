"""Transformer encoder ("Attention Is All You Need", section 3.1, Figure 1 left).

Names and state-dict keys follow `torch.nn.TransformerEncoderLayer` / `TransformerEncoder`
(`self_attn`, `linear1`, `linear2`, `norm1`, `norm2`, `layers.N`, `norm`). Unlike torch the
default is `batch_first=True`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from tfm_cls.model.attention import MultiheadAttention

ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}  # gelu: exact erf


def get_activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    return ACTIVATIONS[activation]


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    """n independent deep copies of `module` (as torch's TransformerEncoder does)."""
    if n <= 0:
        raise ValueError(f"num_layers must be positive, got {n}")
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoderLayer(nn.Module):
    """Self-attention then a position-wise feed-forward network, each wrapped in a residual
    connection with LayerNorm after (post-norm) or before (norm_first, pre-norm) the block."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        norm_first: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.activation = get_activation(activation)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        """src [B, T, D] (or [T, B, D] when batch_first=False); src_mask [T, T] or [B*H, T, T];
        src_key_padding_mask [B, T], True = padding. Returns the same shape as src."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))  # [.., D] -> [.., F] -> [.., D]
        return self.dropout2(x)


class TransformerEncoder(nn.Module):
    """A stack of `num_layers` copies of `encoder_layer`, with an optional final `norm`
    (pre-norm models need one)."""

    def __init__(self, encoder_layer: nn.Module, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """src [B, T, D]; mask [T, T] or [B*H, T, T]; src_key_padding_mask [B, T], True = padding.

        `is_causal=None` means False: unlike torch the mask is not inspected (that would be
        data-dependent control flow, which export cannot trace)."""
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            output = self.norm(output)
        return output

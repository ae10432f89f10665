"""Transformer encoder ("Attention Is All You Need", section 3.1, Figure 1 left).

Names and state-dict keys follow `torch.nn.TransformerEncoderLayer` / `TransformerEncoder`
(`self_attn`, `linear1`, `linear2`, `norm1`, `norm2`, `layers.N`, `norm`). Unlike torch the
default is `batch_first=True`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfm_cls.model.attention import MultiheadAttention, merge_masks

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

    def forward_packed(self, x: Tensor, index: Tensor, batch: int, seq_len: int, padding: Tensor) -> Tensor:
        """The same layer on packed real tokens: x [N, D] holds the non-padded positions of a
        [batch, seq_len] grid (flat positions `index` [N]); `padding` [B, T] is the boolean key
        padding mask. Position-wise work (projections, FFN, norms) skips the padding; only
        attention sees the padded grid."""
        if self.norm_first:
            x = x + self._sa_block_packed(self.norm1(x), index, batch, seq_len, padding)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block_packed(x, index, batch, seq_len, padding))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block_packed(self, x: Tensor, index: Tensor, batch: int, seq_len: int, padding: Tensor) -> Tensor:
        attn = self.self_attn
        d_model = x.size(-1)
        qkv = F.linear(x, attn.in_proj_weight, attn.in_proj_bias)  # [N, 3D]
        mask = merge_masks(
            None,
            padding,
            batch_size=batch,
            num_heads=attn.num_heads,
            tgt_len=seq_len,
            src_len=seq_len,
            dtype=qkv.dtype,  # autocast may have lowered it
            device=qkv.device,
        )  # [B, 1, 1, T]
        grid = qkv.new_zeros(batch * seq_len, 3 * d_model).index_copy(0, index, qkv)  # [B*T, 3D]
        q, k, v = grid.view(batch, seq_len, 3 * d_model).chunk(3, dim=-1)  # 3 x [B, T, D]
        out, _ = attn.attend(q, k, v, mask, need_weights=False, average_attn_weights=False)  # [B, T, D]
        out = out.reshape(batch * seq_len, d_model).index_select(0, index)  # [N, D]
        return self.dropout1(attn.out_proj(out))

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
    (pre-norm models need one).

    With a boolean `src_key_padding_mask` (and no `mask`) in eager mode, the stack runs on the
    real tokens only: projections, feed-forward and norms skip the padding (torch does the like
    with nested tensors, in inference only; this works for training too). `enable_packing=False`
    turns it off. Either way outputs at padded positions are zeros. Under torch.export / dynamo /
    tracing the dense path is used, since packing has a data-dependent size.
    """

    def __init__(
        self, encoder_layer: nn.Module, num_layers: int, norm: nn.Module | None = None, enable_packing: bool = True
    ) -> None:
        super().__init__()
        self.layers = clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_packing = enable_packing

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
        padding = src_key_padding_mask
        if self._can_pack(src, mask, padding, is_causal):
            return self._forward_packed(src, padding)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=padding, is_causal=bool(is_causal))
        if self.norm is not None:
            output = self.norm(output)
        if padding is not None and padding.dtype == torch.bool and src.dim() == 3:
            batch_first = self.layers[0].self_attn.batch_first
            pad3 = (padding if batch_first else padding.t()).unsqueeze(-1)  # [B, T, 1] or [T, B, 1]
            output = torch.where(pad3, 0.0, output)
        return output

    def _can_pack(self, src: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool | None) -> bool:
        return (
            self.enable_packing
            and padding is not None
            and padding.dtype == torch.bool
            and mask is None
            and not is_causal
            and src.dim() == 3
            and all(type(layer) is TransformerEncoderLayer for layer in self.layers)
            and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing()
            and not torch.jit.is_scripting()
        )

    def _forward_packed(self, src: Tensor, padding: Tensor) -> Tensor:
        first = self.layers[0].self_attn
        x = src if first.batch_first else src.transpose(0, 1)  # [B, T, D]
        batch, seq_len, d_model = x.shape
        if tuple(padding.shape) != (batch, seq_len):
            raise ValueError(
                f"src_key_padding_mask must have shape [batch, seq] = [{batch}, {seq_len}], got {list(padding.shape)}"
            )
        if d_model != first.embed_dim:
            raise ValueError(f"src must have last dimension d_model={first.embed_dim}, got shape {list(src.shape)}")
        index = (~padding).reshape(-1).nonzero().squeeze(1)  # [N] flat positions of real tokens
        if index.numel() == batch * seq_len:  # nothing to skip: the dense path without a mask
            return self.forward(src)
        packed = x.reshape(batch * seq_len, d_model).index_select(0, index)  # [N, D]
        for layer in self.layers:
            packed = layer.forward_packed(packed, index, batch, seq_len, padding)
        if self.norm is not None:
            packed = self.norm(packed)
        out = packed.new_zeros(batch * seq_len, d_model).index_copy(0, index, packed).view(batch, seq_len, d_model)
        return out if first.batch_first else out.transpose(0, 1)

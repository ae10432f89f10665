"""Multi-head attention ("Attention Is All You Need", section 3.2), written from scratch.

Parameter names and shapes are those of `torch.nn.MultiheadAttention` (`in_proj_weight`,
`in_proj_bias`, `out_proj.weight`, `out_proj.bias`), so state dicts load both ways.

Mask convention, PyTorch's: a boolean mask marks with `True` what may NOT be attended to; a float
mask is added to the scores. Masked scores get `torch.finfo(dtype).min`, never `-inf`, so a row
with nothing to attend to gives uniform weights instead of NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _check_mask_dtype(mask: Tensor, name: str) -> None:
    if mask.dtype != torch.bool and not mask.is_floating_point():
        hint = ""
        if name == "key_padding_mask":
            hint = " (from an attention_mask with 1 = token, 0 = padding, pass `attention_mask == 0`)"
        raise ValueError(
            f"{name} must be a bool tensor (True = do not attend) or a float tensor (added to the "
            f"scores), got dtype {mask.dtype}{hint}"
        )


def _to_additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask (True = blocked) -> float mask with finfo.min where blocked; float mask -> dtype."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            mask, torch.finfo(dtype).min
        )
    return mask.to(dtype)


def causal_mask(tgt_len: int, src_len: int | None = None, device: torch.device | None = None) -> Tensor:
    """Boolean [tgt_len, src_len] mask, True above the diagonal (the future). Built from aranges,
    so it stays symbolic under torch.export."""
    src_len = tgt_len if src_len is None else src_len
    rows = torch.arange(tgt_len, device=device)
    cols = torch.arange(src_len, device=device)
    return cols.unsqueeze(0) > rows.unsqueeze(1)  # [T, S]


def merge_masks(
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    *,
    batch_size: int,
    num_heads: int,
    tgt_len: int,
    src_len: int,
    dtype: torch.dtype,
    device: torch.device,
    is_causal: bool = False,
) -> Tensor | None:
    """Validate `attn_mask` ([T, S] or [B*H, T, S]) and `key_padding_mask` ([B, S]) and merge them
    into one additive float mask broadcastable to [B, H, T, S] (None when there is no mask).

    `is_causal` with no `attn_mask` builds the causal mask."""
    if key_padding_mask is not None:
        _check_mask_dtype(key_padding_mask, "key_padding_mask")
        if tuple(key_padding_mask.shape) != (batch_size, src_len):
            raise ValueError(
                f"key_padding_mask must have shape [batch, source_len] = [{batch_size}, {src_len}], "
                f"got {list(key_padding_mask.shape)}"
            )
    if attn_mask is not None:
        _check_mask_dtype(attn_mask, "attn_mask")
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise ValueError(
                    f"2-D attn_mask must have shape [target_len, source_len] = [{tgt_len}, {src_len}], "
                    f"got {list(attn_mask.shape)}"
                )
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (batch_size * num_heads, tgt_len, src_len):
                raise ValueError(
                    "3-D attn_mask must have shape [batch * num_heads, target_len, source_len] = "
                    f"[{batch_size * num_heads}, {tgt_len}, {src_len}], got {list(attn_mask.shape)}"
                )
        else:
            raise ValueError(
                f"attn_mask must be 2-D [target_len, source_len] = [{tgt_len}, {src_len}] or 3-D "
                f"[batch * num_heads, target_len, source_len], got {attn_mask.dim()}-D "
                f"{list(attn_mask.shape)}"
            )
    elif is_causal:
        attn_mask = causal_mask(tgt_len, src_len, device=device)

    # Two masked entries summed overflow to -inf, and float masks may hold -inf: clamp in those
    # cases so a fully masked row stays finite.
    merged, needs_clamp = None, False
    if attn_mask is not None:
        merged = _to_additive(attn_mask, dtype)
        if merged.dim() == 3:
            merged = merged.view(batch_size, num_heads, tgt_len, src_len)
        needs_clamp = attn_mask.is_floating_point()
    if key_padding_mask is not None:
        padding = _to_additive(key_padding_mask, dtype).view(batch_size, 1, 1, src_len)
        needs_clamp = needs_clamp or merged is not None or key_padding_mask.is_floating_point()
        merged = padding if merged is None else merged + padding
    if needs_clamp:
        merged = merged.clamp_min(torch.finfo(dtype).min)
    return merged


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q K^T / sqrt(d_k) + mask) V  (equation 1).

    q: [B, H, T, Dh]; k, v: [B, H, S, Dh]; mask: additive float, broadcastable to [B, H, T, S].
    `is_causal` (only used when `mask` is None) applies the causal mask inside the fused kernel.
    Returns (out [B, H, T, Dh], weights [B, H, T, S] or None).
    """
    if not need_weights:
        # Fused kernel (flash / memory-efficient on CPU and GPU); the mask is already finite.
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal and mask is None
        )
        return out, None
    if is_causal and mask is None:
        mask = _to_additive(causal_mask(q.size(-2), k.size(-2), device=q.device), q.dtype)
    scores = (q * (1.0 / math.sqrt(q.size(-1)))) @ k.transpose(-2, -1)  # [B, H, T, S]
    if mask is not None:
        # float16's minimum plus a negative score overflows to -inf: clamp back to finite.
        scores = (scores + mask).clamp_min(torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # [B, H, T, Dh], [B, H, T, S]


class MultiheadAttention(nn.Module):
    """Multi-head attention, a drop-in for `torch.nn.MultiheadAttention` (same parameters, same
    masks) that is batch-first by default.

    Args:
        embed_dim: model width E (query, key and value all have it).
        num_heads: number of heads H; E must be divisible by H.
        dropout: dropout on the attention weights (training only).
        bias: add biases to the input and output projections.
        batch_first: inputs are [batch, seq, E] (True) or [seq, batch, E] (False).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = True,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be positive, got embed_dim={embed_dim}, num_heads={num_heads}"
            )
        if embed_dim % num_heads != 0:
            raise ValueError(
                f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim}, "
                f"num_heads={num_heads} (embed_dim % num_heads = {embed_dim % num_heads})"
            )
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        # Q, K and V projections stacked in one [3E, E] matrix, as torch stores them.
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim, **factory))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # As torch: xavier-uniform for the stacked input projection, zero biases.
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
            nn.init.zeros_(self.out_proj.bias)

    def in_projection(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project [..., E] inputs to Q, K, V [..., E]; one GEMM when query is key is value."""
        w, b = self.in_proj_weight, self.in_proj_bias
        e = self.embed_dim
        if query is key and key is value:
            return F.linear(query, w, b).chunk(3, dim=-1)
        bq, bk, bv = (None, None, None) if b is None else b.split(e)
        q = F.linear(query, w[:e], bq)
        if key is value:
            k, v = F.linear(key, w[e:], None if b is None else b[e:]).chunk(2, dim=-1)
        else:
            k = F.linear(key, w[e : 2 * e], bk)
            v = F.linear(value, w[2 * e :], bv)
        return q, k, v

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        need_weights: bool,
        average_attn_weights: bool,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Projected q [B, T, E], k, v [B, S, E] -> (heads concatenated [B, T, E] before out_proj,
        weights [B, T, S] averaged or [B, H, T, S] per head, or None)."""
        batch, tgt_len, _ = q.shape
        src_len = k.size(1)
        q = q.view(batch, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, T, Dh]
        k = k.view(batch, src_len, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, S, Dh]
        v = v.view(batch, src_len, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, S, Dh]
        dropout_p = self.dropout if self.training else 0.0
        out, weights = attention(q, k, v, mask, dropout_p, need_weights, is_causal)
        out = out.transpose(1, 2).reshape(batch, tgt_len, self.embed_dim)  # [B, T, E]
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)  # [B, T, S]
        return out, weights

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query [B, T, E], key/value [B, S, E] (sequence-first when batch_first=False; unbatched
        [T, E] / [S, E] also accepted); key_padding_mask [B, S]; attn_mask [T, S] or [B*H, T, S].

        `is_causal` is a hint that attn_mask is the causal mask (as in torch); with no attn_mask
        the causal mask is built here. Returns (output like query, weights [B, T, S] when
        averaged, [B, H, T, S] per head, or None when need_weights=False).
        """
        self._check_inputs(query, key, value)
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        batch, tgt_len, _ = query.shape
        src_len = key.size(1)

        # Like torch: trust the causal hint and use the kernel's own causal masking when nothing
        # else needs the explicit mask.
        fused_causal = is_causal and key_padding_mask is None and not need_weights
        q, k, v = self.in_projection(query, key, value)  # [B, T, E], [B, S, E], [B, S, E]
        # Masks take the dtype of the projections, which autocast may have lowered: a float16
        # mask then holds float16's finite minimum, not float32's (which would become -inf).
        mask = merge_masks(
            None if fused_causal else attn_mask,
            key_padding_mask,
            batch_size=batch,
            num_heads=self.num_heads,
            tgt_len=tgt_len,
            src_len=src_len,
            dtype=q.dtype,
            device=query.device,
            is_causal=is_causal and not fused_causal,
        )
        out, weights = self.attend(q, k, v, mask, need_weights, average_attn_weights, fused_causal)
        out = self.out_proj(out)  # [B, T, E]

        if unbatched:
            out = out.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)  # [T, B, E]
        return out, weights

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        if query.dim() not in (2, 3):
            raise ValueError(
                f"query must be 3-D [batch, seq, embed_dim] (or 2-D unbatched), got shape {list(query.shape)}"
            )
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != query.dim():
                raise ValueError(
                    f"{name} must have as many dimensions as query ({query.dim()}), got shape {list(t.shape)}"
                )
            if t.size(-1) != self.embed_dim:
                raise ValueError(
                    f"{name} must have last dimension embed_dim={self.embed_dim}, got shape {list(t.shape)}"
                )
        if key.shape[:-1] != value.shape[:-1]:
            raise ValueError(
                f"key and value must have the same batch and sequence sizes, got key {list(key.shape)} "
                f"and value {list(value.shape)}"
            )
        batch_dim = 0 if self.batch_first else 1
        if query.dim() == 3 and query.size(batch_dim) != key.size(batch_dim):
            raise ValueError(
                f"query and key must have the same batch size (dim {batch_dim}), got query "
                f"{list(query.shape)} and key {list(key.shape)}"
            )

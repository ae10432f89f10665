"""The encoder-decoder Transformer ("Attention Is All You Need", Figure 1), mirroring
`torch.nn.Transformer` (same arguments, same state-dict keys) but batch-first by default."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from tfm_cls.model.decoder import TransformerDecoder, TransformerDecoderLayer
from tfm_cls.model.encoder import TransformerEncoder, TransformerEncoderLayer


class Transformer(nn.Module):
    """Encoder stack + decoder stack, each with a final LayerNorm (as torch.nn.Transformer).
    All weight matrices are initialised xavier-uniform."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        custom_encoder: nn.Module | None = None,
        custom_decoder: nn.Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = True,
        norm_first: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        layer_args = dict(
            d_model=d_model,
            nhead=nhead,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(**layer_args),
                num_encoder_layers,
                nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias),
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(**layer_args),
                num_decoder_layers,
                nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias),
            )
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Float causal mask [sz, sz]: 0 on and below the diagonal, finfo(dtype).min above.

        torch puts -inf above the diagonal; a finite minimum masks the same way but cannot turn a
        fully masked row into NaN."""
        dtype = dtype or torch.get_default_dtype()
        idx = torch.arange(sz, device=device)
        future = idx.unsqueeze(0) > idx.unsqueeze(1)  # [sz, sz], True above the diagonal
        return torch.zeros(sz, sz, device=device, dtype=dtype).masked_fill(future, torch.finfo(dtype).min)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """src [B, S, D], tgt [B, T, D] (sequence-first when batch_first=False) -> [B, T, D].
        Masks as in the encoder and decoder (key padding masks: True = padding)."""
        batch_dim = 0 if self.batch_first else 1
        if src.dim() == 3 and tgt.dim() == 3 and src.size(batch_dim) != tgt.size(batch_dim):
            raise ValueError(
                f"src and tgt must have the same batch size (dim {batch_dim}), got src {list(src.shape)} "
                f"and tgt {list(tgt.shape)}"
            )
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise ValueError(
                f"src and tgt must have last dimension d_model={self.d_model}, got src {list(src.shape)} "
                f"and tgt {list(tgt.shape)}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

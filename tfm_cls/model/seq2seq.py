"""Sequence-to-sequence model: token embeddings + sinusoidal positions + our `Transformer` +
a projection to the target vocabulary ("Attention Is All You Need", Figure 1 end to end)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from tfm_cls.model.attention import causal_mask
from tfm_cls.model.embeddings import PositionalEncoding, TokenEmbedding
from tfm_cls.model.transformer import Transformer


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder over token ids. `forward`, `encode` and `decode` contain no data-dependent
    Python control flow (the causal mask comes from arange comparisons), so each exports with
    torch.onnx.export(dynamo=True). `config` holds the constructor arguments."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 256,
        nhead: int = 4,
        num_encoder_layers: int = 3,
        num_decoder_layers: int = 3,
        dim_feedforward: int = 1024,
        dropout: float = 0.1,
        max_len: int = 512,
        norm_first: bool = True,
        pad_token_id: int | None = 0,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.config: dict[str, Any] = dict(
            src_vocab_size=src_vocab_size,
            tgt_vocab_size=tgt_vocab_size,
            d_model=d_model,
            nhead=nhead,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            max_len=max_len,
            norm_first=norm_first,
            pad_token_id=pad_token_id,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
        )
        self.pad_token_id = pad_token_id
        self.src_embedding = TokenEmbedding(src_vocab_size, d_model, padding_idx=pad_token_id)
        self.tgt_embedding = TokenEmbedding(tgt_vocab_size, d_model, padding_idx=pad_token_id)
        self.positional_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.transformer = Transformer(
            d_model,
            nhead,
            num_encoder_layers,
            num_decoder_layers,
            dim_feedforward,
            dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=True,
            norm_first=norm_first,
        )
        self.output_projection = nn.Linear(d_model, tgt_vocab_size)

    def encode(self, src_ids: Tensor, src_attention_mask: Tensor | None = None) -> Tensor:
        """src_ids [B, S] int64, src_attention_mask [B, S] (1 = token) -> memory [B, S, D]."""
        x = self.positional_encoding(self.src_embedding(src_ids))  # [B, S, D]
        padding = None if src_attention_mask is None else src_attention_mask == 0  # [B, S]
        return self.transformer.encoder(x, src_key_padding_mask=padding)

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        tgt_attention_mask: Tensor | None = None,
        memory_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """tgt_ids [B, T] int64, memory [B, S, D] -> logits [B, T, tgt_vocab]. Position t sees
        target positions <= t only."""
        y = self.positional_encoding(self.tgt_embedding(tgt_ids))  # [B, T, D]
        future = causal_mask(tgt_ids.size(1), device=tgt_ids.device)  # [T, T] bool, True = future
        tgt_padding = None if tgt_attention_mask is None else tgt_attention_mask == 0  # [B, T]
        memory_padding = None if memory_attention_mask is None else memory_attention_mask == 0  # [B, S]
        hidden = self.transformer.decoder(
            y,
            memory,
            tgt_mask=future,
            tgt_key_padding_mask=tgt_padding,
            memory_key_padding_mask=memory_padding,
            tgt_is_causal=True,
        )  # [B, T, D]
        return self.output_projection(hidden)

    def forward(
        self,
        src_ids: Tensor,
        tgt_ids: Tensor,
        src_attention_mask: Tensor | None = None,
        tgt_attention_mask: Tensor | None = None,
    ) -> Tensor:
        """src_ids [B, S], tgt_ids [B, T] (teacher forcing) -> logits [B, T, tgt_vocab]."""
        memory = self.encode(src_ids, src_attention_mask)
        return self.decode(tgt_ids, memory, tgt_attention_mask, src_attention_mask)

    @torch.no_grad()
    def greedy_decode(
        self,
        src_ids: Tensor,
        src_attention_mask: Tensor | None = None,
        max_len: int = 64,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> Tensor:
        """Greedy decoding -> [B, <= max_len] int64, starting with bos_id. A row that has
        produced eos_id emits the pad id (eos_id when pad_token_id is None) afterwards;
        decoding stops once every row is finished or max_len tokens exist. Call eval() first."""
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        pad = self.pad_token_id if self.pad_token_id is not None else eos_id
        memory = self.encode(src_ids, src_attention_mask)  # [B, S, D]
        batch = src_ids.size(0)
        out = torch.full((batch, 1), bos_id, dtype=torch.long, device=src_ids.device)  # [B, 1]
        finished = torch.zeros(batch, dtype=torch.bool, device=src_ids.device)
        for _ in range(max_len - 1):
            logits = self.decode(out, memory, memory_attention_mask=src_attention_mask)[:, -1]  # [B, V]
            next_ids = torch.where(finished, pad, logits.argmax(dim=-1))  # [B]
            out = torch.cat([out, next_ids.unsqueeze(1)], dim=1)
            finished = finished | (next_ids == eos_id)
            if bool(finished.all()):
                break
        return out

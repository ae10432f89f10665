"""Token and position embeddings ("Attention Is All You Need", section 3.4 and 3.5). Batch-first."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def check_length(seq_len: int, max_len: int, who: str) -> None:
    """Raise ValueError for a sequence longer than the position table.

    Under torch.export / dynamo ONNX export the length is symbolic: there the bound is recorded
    with torch._check (a runtime assertion in the graph) instead of a Python branch, so export
    with a dynamic sequence axis keeps working.
    """
    if torch.compiler.is_compiling():
        torch._check(seq_len <= max_len, lambda: f"{who}: sequence length exceeds max_len={max_len}")
    elif seq_len > max_len:
        raise ValueError(
            f"{who}: sequence length {seq_len} exceeds max_len={max_len}; truncate the input or "
            f"build the model with max_len >= {seq_len}"
        )


class TokenEmbedding(nn.Module):
    """Token ids [B, T] -> vectors [B, T, d_model], multiplied by sqrt(d_model) (section 3.4).

    With `scale=True` the table is initialised N(0, 1/d_model), so the scaled output has unit
    variance and a weight-tied output projection starts with logits of unit scale. With
    `scale=False` (BERT-style) it is initialised N(0, 0.02^2) as BERT does.
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None, scale: bool = True) -> None:
        super().__init__()
        if vocab_size <= 0 or d_model <= 0:
            raise ValueError(f"vocab_size and d_model must be positive, got {vocab_size} and {d_model}")
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        self.d_model = d_model
        self.scale = math.sqrt(d_model) if scale else 1.0
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5 if scale else 0.02)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()

    def forward(self, input_ids: Tensor) -> Tensor:
        out = self.embedding(input_ids)  # [B, T, D]
        return out * self.scale if self.scale != 1.0 else out


class PositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding to x [B, T, d_model], then dropout (section 3.5):
    PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    The table is a non-persistent buffer: it is recomputed, never stored in state dicts.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [L, 1]
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term[: d_model // 2])  # odd d_model has one cos fewer
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)  # [1, L, D]

    def forward(self, x: Tensor) -> Tensor:
        seq_len = x.size(1)
        check_length(seq_len, self.max_len, "PositionalEncoding")
        return self.dropout(x + self.pe[:, :seq_len].to(x.dtype))  # [B, T, D]


class LearnedPositionalEncoding(nn.Module):
    """Adds a learned position embedding (positions 0..T-1, as BERT) to x [B, T, d_model], then
    dropout. The table is `embedding.weight` [max_len, d_model]."""

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 512) -> None:
        super().__init__()
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        seq_len = x.size(1)
        check_length(seq_len, self.max_len, "LearnedPositionalEncoding")
        positions = torch.arange(seq_len, device=x.device)  # [T]
        return self.dropout(x + self.embedding(positions).unsqueeze(0))  # [B, T, D]
